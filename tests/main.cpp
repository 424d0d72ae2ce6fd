#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer a request the system cannot satisfy (the allocator tests ask for 2^50
// bytes) would end the process instead of returning null as the C library does; with this the
// CPU allocator sees null and throws OutOfMemoryError, which is what those tests check.
// ASAN_OPTIONS can still override it.
extern "C" __attribute__((used)) const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}
#endif
