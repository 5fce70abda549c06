// ptx_scan.cpp — see ptx_scan.h.
#include "ptx_scan.h"

#include <cctype>
#include <cstdlib>

namespace emu {
namespace {

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

size_t skip_space(const std::string& s, size_t i) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return i;
}

// Bytes of one `.param` declaration, e.g. ".param .u64 x" -> 8, ".param .align 8 .b8 x[16]" -> 16.
size_t param_size(const std::string& decl) {
    size_t bytes = 0;
    for (const char* type : {".b8", ".u8", ".s8"}) {
        if (decl.find(type) != std::string::npos) bytes = 1;
    }
    for (const char* type : {".b16", ".u16", ".s16", ".f16"}) {
        if (decl.find(type) != std::string::npos) bytes = 2;
    }
    for (const char* type : {".b32", ".u32", ".s32", ".f32"}) {
        if (decl.find(type) != std::string::npos) bytes = 4;
    }
    for (const char* type : {".b64", ".u64", ".s64", ".f64"}) {
        if (decl.find(type) != std::string::npos) bytes = 8;
    }
    const size_t bracket = decl.find('[');
    if (bracket != std::string::npos) bytes *= std::strtoull(decl.c_str() + bracket + 1, nullptr, 10);
    return bytes;
}

}  // namespace

bool scan_ptx(const std::string& text, PtxModule* out) {
    *out = PtxModule{};
    const size_t version = text.find(".version");
    if (version != std::string::npos) {
        char* end = nullptr;
        const long major = std::strtol(text.c_str() + version + 8, &end, 10);
        const long minor = (end != nullptr && *end == '.') ? std::strtol(end + 1, nullptr, 10) : 0;
        out->isa_version = static_cast<int>(major * 10 + minor);
    }
    const size_t target = text.find(".target");
    if (target != std::string::npos) {
        const size_t sm = text.find("sm_", target);
        if (sm != std::string::npos && sm < text.find('\n', target)) {
            out->target_sm = static_cast<int>(std::strtol(text.c_str() + sm + 3, nullptr, 10));
        }
    }
    for (size_t at = text.find(".entry"); at != std::string::npos; at = text.find(".entry", at + 6)) {
        size_t i = skip_space(text, at + 6);
        const size_t start = i;
        while (i < text.size() && is_ident(text[i])) ++i;
        if (i == start) continue;
        PtxEntry entry;
        entry.name = text.substr(start, i - start);
        i = skip_space(text, i);
        if (i < text.size() && text[i] == '(') {
            const size_t close = text.find(')', i);
            std::string params = text.substr(i + 1, close == std::string::npos ? std::string::npos : close - i - 1);
            size_t from = 0;
            while (from < params.size()) {
                size_t comma = params.find(',', from);
                if (comma == std::string::npos) comma = params.size();
                const std::string decl = params.substr(from, comma - from);
                if (decl.find(".param") != std::string::npos) entry.param_bytes.push_back(param_size(decl));
                from = comma + 1;
            }
        }
        out->entries.push_back(std::move(entry));
    }
    return !out->entries.empty() || out->isa_version != 0;
}

int max_ptx_isa_for_driver(int driver_version) {
    static const int kTable[][2] = {
        {12000, 80}, {12010, 81}, {12020, 82}, {12030, 83}, {12040, 84}, {12050, 85},
        {12060, 85}, {12080, 87}, {12090, 88}, {13000, 90}, {13010, 91}, {13020, 92},
    };
    int isa = 78;  // CUDA 11.8
    for (const auto& row : kTable) {
        if (driver_version >= row[0]) isa = row[1];
    }
    return isa;
}

}  // namespace emu
