//! Which files a cluster's queries may read and write: `oxide-scheduler --allowed-root`.
//!
//! A cluster member reads and writes whatever paths a client's SQL names: a
//! `CREATE EXTERNAL TABLE … LOCATION '/etc'` followed by a `SELECT`, a URL table, a
//! `COPY … TO '/home/…'`. The workers do it with their own permissions, on their own
//! hosts, and the scheduler does it itself while it plans: it lists a scan's files and
//! reads their footers, and a Flight SQL client's DDL runs there, schema inference
//! included. With allowed roots the scheduler checks every location it is handed, in
//! three places, each before the I/O it guards:
//!
//! ```text
//!  Flight SQL CREATE EXTERNAL TABLE ── table factory: LOCATION as written (factory.rs)
//!  anything the scheduler's session        │
//!  lists, infers or reads ──────────────── object stores: every call's path (store.rs)
//!  a planned scan or write ─────────────── physical rule: each file and sink (here),
//!                                          before any task reaches a worker
//! ```
//!
//! The check runs on the scheduler because the scheduler is the member that turns a
//! client's logical plan into tasks: a limit held by the client (a session setting)
//! would bind only well-behaved clients. It compares object-store paths segment by
//! segment (`Path::prefix_matches`), so `/data/lake2` is not inside `/data/lake`, and a
//! local root is canonicalised once at startup. A path outside the roots is refused on
//! its text alone, before the file system is asked anything, so the refusal reads the
//! same whether or not something is there (a client learns neither bytes nor existence).
//!
//! Symbolic links: a local path inside the roots is also resolved on the scheduler's
//! host (its nearest existing ancestor made canonical), and refused when it leads
//! outside them, so a link inside a root that points elsewhere is caught on a file
//! system the scheduler shares with the workers — also a link met while listing a
//! directory, since each file is checked again when it is read. The refusal names the
//! path as written only, never where the link leads, and reads the same for a link to
//! nothing (or to a place the scheduler cannot enter) as for one to an existing file
//! outside: a link inside a root must not tell a client what exists outside it. What it
//! does not cover: a link that resolves differently on a worker's host than on the
//! scheduler's, or one created after the query was planned, or a link planted where a
//! partitioned write will create a directory (`root/out/k=1`); any other path the
//! scheduler cannot resolve (a directory inside the roots it may not enter) is refused
//! too.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::datasource::object_store::ObjectStoreUrl;
use datafusion::datasource::physical_plan::{FileScanConfig, FileSink};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::object_store::ObjectStoreRegistry;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use object_store::path::Path;

mod factory;
mod location;
mod store;

use factory::RootedTableFactory;
use store::RootedRegistry;

/// One allowed root: an object store and a path prefix inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedRoot {
    store: ObjectStoreUrl,
    prefix: Path,
    /// As the operator wrote it, for messages.
    shown: String,
}

impl AllowedRoot {
    /// A local directory (made absolute and canonical: it must exist) or a URL such as
    /// `s3://bucket/prefix`.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        if text.contains("://") {
            let url = ListingTableUrl::parse(text).map_err(|e| format!("{text}: {e}"))?;
            return Ok(Self {
                store: url.object_store(),
                prefix: url.prefix().clone(),
                shown: text.to_string(),
            });
        }
        let dir = std::fs::canonicalize(text)
            .map_err(|e| format!("{text}: {e} (an allowed root must exist)"))?;
        if !dir.is_dir() {
            return Err(format!("{text}: not a directory"));
        }
        let prefix = Path::from_filesystem_path(&dir).map_err(|e| format!("{text}: {e}"))?;
        Ok(Self {
            store: ObjectStoreUrl::local_filesystem(),
            prefix,
            shown: dir.display().to_string(),
        })
    }

    fn contains(&self, store: &ObjectStoreUrl, path: &Path) -> bool {
        &self.store == store && path.prefix_matches(&self.prefix)
    }
}

/// The scheduler's allowed roots: a physical optimizer rule, and a guard on its
/// sessions' table factories and object stores ([`FileAccess::guard_session`]).
#[derive(Debug, Clone, Default)]
pub struct FileAccess {
    roots: Vec<AllowedRoot>,
}

impl FileAccess {
    /// Access limited to `roots`; an empty list allows every path (the default: the
    /// scheduler's help and docs/cluster.md say what that exposes).
    pub fn new(roots: Vec<AllowedRoot>) -> Self {
        Self { roots }
    }

    /// Whether any limit is configured.
    pub fn is_limited(&self) -> bool {
        !self.roots.is_empty()
    }

    fn allows(&self, store: &ObjectStoreUrl, path: &Path) -> bool {
        self.roots.iter().any(|root| root.contains(store, path))
    }

    /// `state` with its file access limited to the roots before any I/O: each `CREATE
    /// EXTERNAL TABLE` location is checked as written before DataFusion looks at it, and
    /// every call of the session's object stores (a scan's listing and footers, schema
    /// and partition inference, a URL table) before it reaches the store. The physical
    /// rule itself is installed by the caller, among its optimizer rules. `state` is
    /// returned as it is when no limit is configured.
    pub fn guard_session(&self, state: SessionState) -> Result<SessionState> {
        if !self.is_limited() {
            return Ok(state);
        }
        let access = Arc::new(self.clone());
        let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(RootedRegistry::new(
            Arc::clone(&state.runtime_env().object_store_registry),
            Arc::clone(&access),
        ));
        let runtime = RuntimeEnvBuilder::from_runtime_env(state.runtime_env())
            .with_object_store_registry(registry)
            .build_arc()?;
        let session_id = state.session_id().to_string();
        let mut state = SessionStateBuilder::new_from_existing(state)
            .with_session_id(session_id)
            .with_runtime_env(runtime)
            .build();
        for factory in state.table_factories_mut().values_mut() {
            let inner = Arc::clone(factory);
            *factory = Arc::new(RootedTableFactory::new(inner, Arc::clone(&access)));
        }
        Ok(state)
    }

    /// Refuses `path` (read or written, as `what` says) when it lies outside the roots
    /// as written, or when on this host it leads outside them through a symbolic link.
    fn check_path(&self, what: &str, store: &ObjectStoreUrl, path: &Path) -> Result<()> {
        self.admit(what, store, path).map_err(DataFusionError::Plan)
    }

    /// Why `path` may not be touched (read, listed or written, as `what` says), if it may
    /// not. A path outside the roots as written is refused on its text alone, before the
    /// file system is asked anything, so the words are the same whether or not it
    /// exists; one inside them is resolved on this host and refused when it leads
    /// outside them through a symbolic link or cannot be resolved.
    fn admit(
        &self,
        what: &str,
        store: &ObjectStoreUrl,
        path: &Path,
    ) -> std::result::Result<(), String> {
        if !self.is_limited() {
            return Ok(());
        }
        if !self.allows(store, path) {
            return Err(format!(
                "{what} {} is outside the cluster's allowed roots ({}); the scheduler's \
                 --allowed-root sets them",
                shown(store, path),
                self
            ));
        }
        match resolved(store, path) {
            Ok(Resolved::At(real)) if !self.allows(store, &real) => {
                Err(self.through_link(what, store, path))
            }
            Ok(Resolved::ThroughUnresolvableLink) => Err(self.through_link(what, store, path)),
            Ok(Resolved::At(_) | Resolved::NotLocal) => Ok(()),
            Err(why) => Err(format!(
                "{what} {}: the scheduler cannot tell where it leads ({why}), and the \
                 cluster's file access is limited to {self}",
                shown(store, path)
            )),
        }
    }

    /// The refusal of `path`, inside the roots as written, that a symbolic link leads
    /// out of them or to nothing the scheduler can reach: the path as written only, in
    /// the same words either way, so that it tells nothing of what lies outside.
    fn through_link(&self, what: &str, store: &ObjectStoreUrl, path: &Path) -> String {
        format!(
            "{what} {} leads outside the cluster's allowed roots ({self}) through a symbolic \
             link, or to nothing the scheduler can reach; the scheduler's --allowed-root \
             sets them",
            shown(store, path)
        )
    }

    /// Refuses `node` if it scans or writes a file outside the roots.
    fn check(&self, node: &Arc<dyn ExecutionPlan>) -> Result<()> {
        if let Some(source) = node.downcast_ref::<DataSourceExec>() {
            let any: &dyn Any = source.data_source().as_ref();
            if let Some(scan) = any.downcast_ref::<FileScanConfig>() {
                for file in scan.file_groups.iter().flat_map(|group| group.iter()) {
                    self.check_path(
                        "reading",
                        &scan.object_store_url,
                        &file.object_meta.location,
                    )?;
                }
            }
        }
        if let Some(sink) = node.downcast_ref::<DataSinkExec>() {
            let any: &dyn Any = sink.sink();
            let config = if let Some(s) =
                any.downcast_ref::<datafusion::datasource::file_format::parquet::ParquetSink>()
            {
                s.config()
            } else if let Some(s) =
                any.downcast_ref::<datafusion::datasource::file_format::csv::CsvSink>()
            {
                s.config()
            } else if let Some(s) =
                any.downcast_ref::<datafusion::datasource::file_format::json::JsonSink>()
            {
                s.config()
            } else {
                // A sink whose target cannot be read here (Arrow files, a memory table,
                // a custom table provider) is refused rather than trusted.
                return Err(DataFusionError::Plan(format!(
                    "this kind of write (not Parquet, CSV or JSON files) is not allowed \
                     while the cluster's file access is limited to {self}"
                )));
            };
            for table in &config.table_paths {
                self.check_path("writing", &table.object_store(), table.prefix())?;
            }
        }
        Ok(())
    }
}

/// Where a path leads on the scheduler's host.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// Not a local path: nothing to resolve.
    NotLocal,
    /// It leads here (symbolic links resolved).
    At(Path),
    /// Through a symbolic link to something that cannot be resolved: nothing, or a
    /// directory the scheduler may not enter.
    ThroughUnresolvableLink,
}

/// Where local `path` leads on this host: its nearest existing ancestor made canonical
/// (symbolic links resolved), with the parts that do not exist yet (a file about to be
/// written) appended. [`Resolved::ThroughUnresolvableLink`] when a symbolic link on the
/// way leads to something that cannot be resolved (the words of its refusal must not
/// depend on what is there); an error when the path cannot be resolved otherwise: a
/// directory the scheduler may not enter, a name that is not UTF-8.
fn resolved(store: &ObjectStoreUrl, path: &Path) -> std::result::Result<Resolved, String> {
    if store != &ObjectStoreUrl::local_filesystem() {
        return Ok(Resolved::NotLocal);
    }
    let full = std::path::Path::new("/").join(path.as_ref());
    let mut existing = full.as_path();
    let mut missing = Vec::new();
    let real = loop {
        match std::fs::canonicalize(existing) {
            Ok(real) => break real,
            // Absent (not a link to something absent): the rest is yet to be created.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && std::fs::symlink_metadata(existing).is_err() =>
            {
                let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
                    return Err(format!("{}: {e}", existing.display()));
                };
                missing.push(name);
                existing = parent;
            }
            Err(_) if through_link(existing) => return Ok(Resolved::ThroughUnresolvableLink),
            Err(e) => return Err(format!("{}: {e}", existing.display())),
        }
    };
    let real = missing.iter().rev().fold(real, |dir, part| dir.join(part));
    Path::from_absolute_path(&real)
        .map(Resolved::At)
        .map_err(|e| format!("{}: {e}", real.display()))
}

/// Whether `path` or one of its ancestors is a symbolic link (on a path inside the
/// roots as written: the roots themselves are canonical, so only links below them).
fn through_link(path: &std::path::Path) -> bool {
    path.ancestors()
        .any(|part| std::fs::symlink_metadata(part).is_ok_and(|meta| meta.file_type().is_symlink()))
}

/// `file:///a/b` or `s3://bucket/a/b`, for messages.
fn shown(store: &ObjectStoreUrl, path: &Path) -> String {
    let base = store.as_str().trim_end_matches('/');
    format!("{base}/{path}")
}

impl fmt::Display for FileAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let roots: Vec<&str> = self.roots.iter().map(|r| r.shown.as_str()).collect();
        write!(f, "{}", roots.join(", "))
    }
}

impl PhysicalOptimizerRule for FileAccess {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if self.is_limited() {
            plan.apply(|node| {
                self.check(node)?;
                Ok(TreeNodeRecursion::Continue)
            })?;
        }
        Ok(plan)
    }

    fn name(&self) -> &str {
        "oxidelake_file_access"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::*;

    fn local(path: &std::path::Path) -> Path {
        Path::from_absolute_path(path).unwrap()
    }

    #[test]
    fn a_local_root_holds_its_files_but_not_a_sibling_sharing_its_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let root_dir = dir.path().join("lake");
        std::fs::create_dir(&root_dir).unwrap();
        let root = AllowedRoot::parse(root_dir.to_str().unwrap()).unwrap();
        let store = ObjectStoreUrl::local_filesystem();
        let canonical = std::fs::canonicalize(&root_dir).unwrap();
        assert!(root.contains(&store, &local(&canonical.join("t/part-0.parquet"))));
        assert!(!root.contains(&store, &local(&canonical.with_file_name("lake2/x.parquet"))));
        assert!(!root.contains(&store, &local(&canonical.with_file_name("x.parquet"))));
        let s3 = ObjectStoreUrl::parse("s3://bucket").unwrap();
        assert!(
            !root.contains(&s3, &local(&canonical.join("x"))),
            "another store"
        );
    }

    #[test]
    fn a_url_root_holds_paths_under_its_prefix_in_its_own_store_only() {
        let root = AllowedRoot::parse("s3://bucket/data").unwrap();
        let bucket = ObjectStoreUrl::parse("s3://bucket").unwrap();
        assert!(root.contains(&bucket, &Path::from("data/t/x.parquet")));
        assert!(!root.contains(&bucket, &Path::from("database/x.parquet")));
        let other = ObjectStoreUrl::parse("s3://other").unwrap();
        assert!(!root.contains(&other, &Path::from("data/x.parquet")));
    }

    #[test]
    fn a_root_that_does_not_exist_or_is_a_file_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = AllowedRoot::parse(missing.to_str().unwrap()).unwrap_err();
        assert!(err.contains("nope") && err.contains("must exist"), "{err}");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let err = AllowedRoot::parse(file.to_str().unwrap()).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_inside_a_root_that_leads_outside_is_refused_for_reads_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (root_dir, outside) = (dir.path().join("lake"), dir.path().join("secret"));
        std::fs::create_dir_all(root_dir.join("real")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("x.parquet"), b"x").unwrap();
        std::fs::write(root_dir.join("real/y.parquet"), b"y").unwrap();
        std::os::unix::fs::symlink(&outside, root_dir.join("link")).unwrap();
        std::os::unix::fs::symlink(root_dir.join("real"), root_dir.join("inner")).unwrap();
        let access = FileAccess::new(vec![
            AllowedRoot::parse(root_dir.to_str().unwrap()).unwrap(),
        ]);
        let store = ObjectStoreUrl::local_filesystem();
        let root = std::fs::canonicalize(&root_dir).unwrap();

        let err = access
            .check_path("reading", &store, &local(&root.join("link/x.parquet")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("link/x.parquet") && err.contains("through a symbolic link"),
            "names the path as written: {err}"
        );
        assert!(!err.contains("secret"), "not where it leads: {err}");
        let err = access
            .check_path(
                "writing",
                &store,
                &local(&root.join("link/new/out.parquet")),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");

        // A link to nothing: where a write through it would land is unknown.
        std::os::unix::fs::symlink(dir.path().join("gone"), root_dir.join("dangling")).unwrap();
        let err = access
            .check_path(
                "writing",
                &store,
                &local(&root.join("dangling/out.parquet")),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("through a symbolic link"), "{err}");

        for inside in ["real/y.parquet", "inner/y.parquet", "new/out.parquet"] {
            access
                .check_path("reading", &store, &local(&root.join(inside)))
                .unwrap_or_else(|e| panic!("{inside}: {e}"));
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_and_a_live_link_out_of_the_roots_are_refused_alike_without_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let (root_dir, outside) = (dir.path().join("lake"), dir.path().join("hidden"));
        std::fs::create_dir(&root_dir).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("present.txt"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.join("present.txt"), root_dir.join("l.csv")).unwrap();
        std::os::unix::fs::symlink(outside.join("absent.txt"), root_dir.join("d.csv")).unwrap();
        std::os::unix::fs::symlink(&outside, root_dir.join("ldir")).unwrap();
        std::os::unix::fs::symlink(outside.join("gone"), root_dir.join("ddir")).unwrap();
        let access = FileAccess::new(vec![
            AllowedRoot::parse(root_dir.to_str().unwrap()).unwrap(),
        ]);
        let store = ObjectStoreUrl::local_filesystem();
        let root = std::fs::canonicalize(&root_dir).unwrap();
        let refusal = |what: &str, written: &str| {
            access
                .admit(what, &store, &local(&root.join(written)))
                .unwrap_err()
        };
        for what in ["reading", "writing", "listing"] {
            let live = refusal(what, "l.csv");
            let dangling = refusal(what, "d.csv");
            assert_eq!(
                live.replace("l.csv", "NAME"),
                dangling.replace("d.csv", "NAME")
            );
            let live = refusal(what, "ldir/present.txt");
            let dangling = refusal(what, "ddir/present.txt");
            assert_eq!(
                live.replace("ldir", "NAME"),
                dangling.replace("ddir", "NAME")
            );
            for refusal in [live, dangling] {
                assert!(refusal.contains("through a symbolic link"), "{refusal}");
                assert!(
                    !refusal.contains("hidden")
                        && !refusal.contains("absent")
                        && !refusal.contains("gone"),
                    "the target is not named: {refusal}"
                );
            }
        }
    }

    /// A guarded session over `root` (information_schema on), with `root/ok.csv` declared
    /// as `ok`; and a directory outside it holding `creds.txt`, whose lines hold `SECRET`.
    async fn guarded_context(
        dir: &std::path::Path,
    ) -> (SessionContext, std::path::PathBuf, std::path::PathBuf) {
        // Canonical, as the root is: a location is compared with it as written.
        let dir = std::fs::canonicalize(dir).unwrap();
        let (root, outside) = (dir.join("lake"), dir.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("ok.csv"), b"visible_col\n1\n").unwrap();
        std::fs::write(
            outside.join("creds.txt"),
            b"root:SECRET-HASH:19000\nsecond SECRET line\n",
        )
        .unwrap();
        let access = FileAccess::new(vec![AllowedRoot::parse(root.to_str().unwrap()).unwrap()]);
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_config(SessionConfig::new().with_information_schema(true))
            .build();
        let ctx = SessionContext::new_with_state(access.guard_session(state).unwrap());
        run(&ctx, &create_csv("ok", &root.join("ok.csv")))
            .await
            .unwrap();
        (ctx, root, outside)
    }

    fn create_csv(name: &str, location: &std::path::Path) -> String {
        format!(
            "CREATE EXTERNAL TABLE {name} STORED AS CSV LOCATION '{}' \
             OPTIONS ('format.delimiter' '|', 'format.has_header' 'true')",
            location.display()
        )
    }

    /// `sql`'s result, pretty-printed, or its error's text.
    async fn run(ctx: &SessionContext, sql: &str) -> std::result::Result<String, String> {
        let frame = ctx.sql(sql).await.map_err(|e| e.to_string())?;
        let batches = frame.collect().await.map_err(|e| e.to_string())?;
        Ok(arrow::util::pretty::pretty_format_batches(&batches)
            .map_err(|e| e.to_string())?
            .to_string())
    }

    #[tokio::test]
    async fn an_external_table_outside_the_roots_is_refused_alike_whether_or_not_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, _root, outside) = guarded_context(dir.path()).await;
        let mut refusals = Vec::new();
        for (name, file) in [("c", "creds.txt"), ("m", "absent.txt")] {
            let refusal = run(&ctx, &create_csv(name, &outside.join(file)))
                .await
                .unwrap_err();
            assert!(
                refusal.contains("table location")
                    && refusal.contains("outside the cluster's allowed roots"),
                "{refusal}"
            );
            refusals.push(refusal.replace(file, "NAME"));
        }
        assert_eq!(
            refusals[0], refusals[1],
            "an existing and a missing file are refused in the same words"
        );

        let mut seen = refusals.join("\n");
        for sql in [
            "DESCRIBE c",
            "SHOW COLUMNS FROM c",
            "SELECT table_name, column_name FROM information_schema.columns",
            "SELECT * FROM c",
        ] {
            let answer = run(&ctx, sql).await.unwrap_or_else(|e| e);
            seen.push_str(&answer);
        }
        assert!(!seen.contains("SECRET"), "no byte of the file: {seen}");
        let columns = run(&ctx, "SELECT column_name FROM information_schema.columns")
            .await
            .unwrap();
        assert!(
            columns.contains("visible_col"),
            "the catalog answers for the table inside the root: {columns}"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_symbolic_link_listed_in_a_table_directory_inside_the_roots_is_not_read_through() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, root, outside) = guarded_context(dir.path()).await;
        let table_dir = root.join("t");
        std::fs::create_dir(&table_dir).unwrap();
        std::fs::write(table_dir.join("a.csv"), b"visible_col\n1\n").unwrap();
        std::os::unix::fs::symlink(outside.join("creds.txt"), table_dir.join("b.csv")).unwrap();

        let refusal = run(&ctx, &create_csv("t", &table_dir.join("")))
            .await
            .unwrap_err();
        assert!(refusal.contains("through a symbolic link"), "{refusal}");
        assert!(!refusal.contains("SECRET"), "{refusal}");
        let described = run(&ctx, "DESCRIBE t").await.unwrap_or_else(|e| e);
        assert!(!described.contains("SECRET"), "{described}");
    }

    #[test]
    fn without_roots_every_plan_passes_and_the_rule_says_it_is_unlimited() {
        let access = FileAccess::default();
        assert!(!access.is_limited());
        assert_eq!(access.name(), "oxidelake_file_access");
    }
}
