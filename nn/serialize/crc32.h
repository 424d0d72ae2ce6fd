// CRC-32 (IEEE 802.3, the polynomial of zlib, gzip and PNG), so Python's zlib.crc32 checks the
// same numbers that checkpoint manifests record.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sl::serialize {

/// Continues a CRC-32 over n more bytes: crc32(crc32(0, a), b) == crc32(0, a + b).
/// crc32(0, "123456789", 9) == 0xCBF43926.
uint32_t crc32(uint32_t crc, const void* data, size_t n);

}  // namespace sl::serialize
