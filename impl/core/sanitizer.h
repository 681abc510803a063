// Whether this translation unit is built under AddressSanitizer (ci/test.sh's build-asan, clang or
// GCC). DCP_ASAN is defined for code that needs the sanitizer's interface headers; tests use
// sanitized_cases() to run a stated fraction of a large random suite there (the normal build runs
// it whole: the sanitizers look for memory errors and undefined behaviour, which a tenth of
// thousands of seeded inputs reaches on every code path, at ~10x the normal build's run time).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DCP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DCP_ASAN 1
#endif
#endif

namespace dcp {

#ifdef DCP_ASAN
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// The number of cases of a random suite of `cases` to run in this build: all of them normally,
// a tenth (at least one) under AddressSanitizer.
constexpr int sanitized_cases(int cases) { return kAddressSanitizer ? (cases + 9) / 10 : cases; }

}  // namespace dcp
