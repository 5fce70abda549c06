// Without a build script cargo would not build the [build-dependencies] the hack lists
// for the workspace's build scripts.
fn main() {}
