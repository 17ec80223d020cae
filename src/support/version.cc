#include "support/version.h"

#ifndef KILN_VERSION_STRING
#error "KILN_VERSION_STRING must be defined (CMakeLists.txt sets it from the project version)"
#endif

namespace kiln {

const char* kiln_version() { return KILN_VERSION_STRING; }

}  // namespace kiln
