// ptx_scan.h — reads what the emulator needs from PTX text: the `.version`, the
// `.target`, and each `.entry` with its parameter sizes. No PTX is executed.
#pragma once

#include <string>
#include <vector>

namespace emu {

struct PtxEntry {
    std::string name;
    std::vector<size_t> param_bytes;
};

struct PtxModule {
    int isa_version = 0;  // `.version 8.8` -> 88; 0 if absent
    int target_sm = 0;    // `.target sm_90` -> 90; 0 if absent
    std::vector<PtxEntry> entries;
};

// Returns false when `text` does not look like PTX (no `.entry` and no `.version`).
bool scan_ptx(const std::string& text, PtxModule* out);

// The newest PTX ISA version a driver of `driver_version` (e.g. 12080) JIT-compiles.
int max_ptx_isa_for_driver(int driver_version);

}  // namespace emu
