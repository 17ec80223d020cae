# Cross-building kiln's runtime and kiln-run for 32-bit Arm Linux (armv7-a,
# hard float: Raspberry Pi 2/3/4 with a 32-bit OS) with Debian's cross
# compiler and armhf libraries (scripts/install-deps.sh installs them):
#   cmake -S . -B build-armv7 -G Ninja -DKILN_RUNTIME_ONLY=ON \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(CMAKE_LIBRARY_ARCHITECTURE arm-linux-gnueabihf)
set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
set(CMAKE_CXX_COMPILER arm-linux-gnueabihf-g++)
set(CMAKE_FIND_ROOT_PATH /usr/arm-linux-gnueabihf /usr/lib/arm-linux-gnueabihf)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The runtime library alone is enough to link against: when only
# libarchive13:armhf is installed (its -dev package needs every compression
# library's -dev package for armhf too), use the versioned library; the
# header is the same for every architecture.
if(NOT EXISTS /usr/lib/arm-linux-gnueabihf/libarchive.so AND
   EXISTS /usr/lib/arm-linux-gnueabihf/libarchive.so.13)
  set(LibArchive_LIBRARY /usr/lib/arm-linux-gnueabihf/libarchive.so.13 CACHE FILEPATH "")
endif()
