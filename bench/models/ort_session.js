// What the ONNX Runtime drivers (ort_bench.js, ort_profile.js, ort_run.js, ort_run_samples.js)
// share: loading onnxruntime-node, their options, the benchmark session and the input feeds.
'use strict';

const { readNpz } = require('./npz');

// onnxruntime-node, or exit 2 (the smoke tests' "skipped") with how to install it.
function requireOrt(tool) {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    console.error(
      `${tool}: onnxruntime-node is not installed; run: cd bench/models && ` +
        'ONNXRUNTIME_NODE_INSTALL=skip npm install'
    );
    process.exit(2);
  }
}

// --key value options over `defaults` (numbers, except the keys in `strings`), the rest
// positional; `usage(msg)` exits.
function parseOptions(argv, defaults, usage, strings = []) {
  const opts = { ...defaults, positional: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      opts.positional.push(a);
      continue;
    }
    const key = a.slice(2);
    if (!(key in defaults)) usage(`unknown option ${a}`);
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    const v = argv[++i];
    opts[key] = strings.includes(key) ? v : Number(v);
    if (!strings.includes(key) && !Number.isFinite(opts[key])) usage(`${a}: not a number: ${v}`);
  }
  return opts;
}

// The benchmark session: intra-op threads = opts.threads, one inter-op thread, sequential,
// all graph optimizations, intra-op spinning as opts.spin says; `extra` adds options.
function benchSession(ort, modelPath, opts, extra = {}) {
  return ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    extra: { session: { intra_op: { allow_spinning: String(opts.spin) } } },
    ...extra,
  });
}

// The session's inputs from the npz, by ONNX input name.
function inputFeeds(ort, session, inputPath) {
  const arrays = readNpz(inputPath);
  const feeds = {};
  for (const name of session.inputNames) {
    const a = arrays.get(name);
    if (!a) throw new Error(`${inputPath}: no array named '${name}' (model input)`);
    feeds[name] = new ort.Tensor(a.type, a.data, a.dims);
  }
  return feeds;
}

module.exports = { requireOrt, parseOptions, benchSession, inputFeeds };
