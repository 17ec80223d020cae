// ONNX 1.12 infers STFT's output shape against its own specification: it
// takes onesided's default as 0 (the operator's is 1, which its reference
// and test data follow), and with onesided = 1 it counts the frames from the
// number of bins instead of the frame length (a [2, 100, 1] signal, frames
// of 20 every 7: 13 frames where there are 12). kiln replaces that one
// inference function, before any model is inferred, with one that follows
// the specification (graph/ops/signal.h's stft_spec), so that the shapes
// downstream of an STFT agree with what it computes.
#pragma once

namespace kiln::frontend {

// Idempotent; called by the importer before ONNX's shape inference.
void install_signal_shape_inference();

}  // namespace kiln::frontend
