// Human-readable text of expressions, statements and lowered functions.
#pragma once

#include <ostream>
#include <string>

#include "ir/expr.h"
#include "ir/function.h"
#include "ir/stmt.h"

namespace kiln::ir {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::string to_string(const LoweredFunc& f);

std::ostream& operator<<(std::ostream& os, const Expr& e);
std::ostream& operator<<(std::ostream& os, const Stmt& s);

}  // namespace kiln::ir
