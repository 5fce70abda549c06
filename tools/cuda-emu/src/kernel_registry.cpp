// kernel_registry.cpp — the name -> host kernel table (see kernel_registry.h).
#include "kernel_registry.h"

#include <map>
#include <memory>
#include <mutex>

namespace emu {
namespace {

struct Registry {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<KernelEntry>> kernels;
};

Registry& registry() {
    static Registry* r = new Registry();  // used by static initialisers of other files
    return *r;
}

}  // namespace

bool register_kernel(const char* name, const char* source_file, std::vector<size_t> param_bytes,
                     KernelBody (*bind)(void** params)) {
    auto entry = std::make_unique<KernelEntry>();
    entry->name = name;
    entry->source_file = source_file;
    entry->param_bytes = std::move(param_bytes);
    entry->bind = bind;
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.kernels[name] = std::move(entry);
    return true;
}

KernelEntry* find_kernel(const std::string& name) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.kernels.find(name);
    return it == r.kernels.end() ? nullptr : it->second.get();
}

std::vector<KernelEntry*> all_kernels() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<KernelEntry*> out;
    for (auto& [name, entry] : r.kernels) out.push_back(entry.get());
    return out;
}

}  // namespace emu
