#!/bin/sh
# gpu.lazy_libraries: BINARY links none of CUDA's libraries (the driver,
# NVRTC, cuBLASLt, the runtime): they are opened with dlopen at first use
# (runtime/device/cuda_driver.c, cuda_toolkit.c). Linked, cuBLASLt alone
# added 0.4 s to every tlm-run command, on the CPU too.
#
#   lazy_libraries.sh READELF BINARY
readelf=$1 binary=$2
out=$("$readelf" -d "$binary") || { echo "gpu.lazy_libraries: $readelf -d $binary failed"; exit 1; }
needed=$(printf '%s\n' "$out" | grep '(NEEDED)')
if [ -z "$needed" ]; then
    echo "gpu.lazy_libraries: $binary has no NEEDED entries (not a dynamic executable?)"
    exit 1
fi
cuda=$(printf '%s\n' "$needed" | grep -E '\[lib(cuda|nvrtc|cublasLt|cublas|cudart)\.')
if [ -n "$cuda" ]; then
    echo "gpu.lazy_libraries: FAILED: $binary links CUDA libraries, which must be opened at first use:"
    printf '%s\n' "$cuda"
    exit 1
fi
echo "gpu.lazy_libraries: $binary needs only:"
printf '%s\n' "$needed" | sed 's/.*Shared library: /  /'
