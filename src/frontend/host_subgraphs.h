// Control flow (If, Loop, Scan, SequenceMap) and the values that are not
// tensors (sequences, optionals), on their way into the host region.
// Private to src/frontend.
//
// A node with a graph-valued attribute runs in the executor's host region
// (runtime/host_region.h), and so does every node of its subgraphs: they are
// converted here into graph::Subgraph, recursively, with their values' types
// and constants added to the region. ONNX names are unique across a graph and
// its subgraphs, so every value keeps its name; a subgraph node may read any
// value of the scopes around it.
#pragma once

#include <map>
#include <set>
#include <string>

#include "graph/graph.h"

namespace onnx {
class GraphProto;
class NodeProto;
class TypeProto;
}  // namespace onnx

namespace kiln::frontend {

// The host region's name for a value's type: "float32" for a tensor,
// "sequence<float32>", "optional<float32>", "optional<sequence<float32>>";
// "" when ONNX gave no element type. `what` names the value in errors.
std::string host_type_name(const onnx::TypeProto& t, const std::string& what);

// Whether `t` is a sequence or an optional (a value kiln's kernels never hold).
bool is_host_only_type(const onnx::TypeProto& t);

bool has_subgraphs(const onnx::NodeProto& n);

// The values of enclosing scopes that `n`'s subgraphs read (recursively),
// which the node therefore depends on besides its inputs.
std::set<std::string> subgraph_reads(const onnx::NodeProto& n);

// Value names of enclosing subgraphs as the host region knows them.
using Renames = std::map<std::string, std::string>;

// Converts each subgraph of `n` (named `name` in messages) into
// `node->subgraphs`, adding its values' types to host->dtypes and its
// initializers and Constant nodes to host->constants, under names prefixed
// "<name>/<attribute>/" (ONNX names need not be unique across scopes; the
// region's are). `scope` renames what enclosing subgraphs define (empty at
// the top level). Every node inside must
// be one the executor runs (`host_ops`); otherwise, or for a value without an
// element type, an ImportError names the node, the subgraph and the inner
// node.
void convert_subgraphs(const onnx::NodeProto& n, const std::string& name,
                       const std::set<std::string>& host_ops, graph::Node* node,
                       graph::HostRegion* host, const Renames& scope = {});

}  // namespace kiln::frontend
