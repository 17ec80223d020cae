#!/usr/bin/env node
// ONNX Runtime's own time per node of a model (its profiler), for layer_compare.py.
//
//   node ort_profile.js model.onnx input.npz [--threads 2] [--warmup 3] [--repeat 10] [--spin 0]
//
// The session is ort_bench.js's (intra-op threads = --threads, sequential, all graph
// optimizations, spinning off unless --spin 1) with ORT's profiler on. Prints one JSON line per
// node in execution order: {"name", "op", "ms" (the median of its --repeat timed runs),
// "output_elements"} (the warm-up runs are dropped). The names and op types are those of ORT's
// optimized graph: fused nodes ("FusedConv"), NCHWc convolutions named after their outputs.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { requireOrt, parseOptions, benchSession, inputFeeds } = require('./ort_session');

const ort = requireOrt('ort_profile');

function usage(msg) {
  if (msg) console.error(`ort_profile: ${msg}`);
  console.error(
    'usage: node ort_profile.js model.onnx input.npz [--threads N] [--warmup N] [--repeat N] ' +
      '[--spin 0|1]'
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = parseOptions(argv, { threads: 2, warmup: 3, repeat: 10, spin: 0 }, usage);
  if (opts.positional.length !== 2) usage('need model.onnx and input.npz');
  if (opts.repeat < 1) usage('--repeat must be at least 1');
  return opts;
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function elements(outputTypeShape) {
  // [{"float": [1, 64, 112, 112]}]: the node's first output.
  const dims = outputTypeShape && outputTypeShape.length ? Object.values(outputTypeShape[0])[0] : [];
  return dims.reduce((n, d) => n * d, 1);
}

// Node events of the profile, grouped by node in order of first execution; each node's first
// `skip` executions (the warm-up runs) dropped.
function nodeTimes(events, skip) {
  const byName = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!byName.has(name)) {
      byName.set(name, { op: e.args.op_name, elements: elements(e.args.output_type_shape), us: [] });
    }
    byName.get(name).us.push(e.dur);
  }
  const nodes = [];
  for (const [name, n] of byName) {
    const timed = n.us.length > skip ? n.us.slice(skip) : n.us;
    nodes.push({ name, op: n.op, ms: median(timed) / 1000, output_elements: n.elements });
  }
  return nodes;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const [modelPath, inputPath] = opts.positional;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile_'));
  try {
    const session = await benchSession(ort, modelPath, opts, {
      enableProfiling: true,
      profileFilePrefix: path.join(dir, 'ort'),
    });
    const feeds = inputFeeds(ort, session, inputPath);
    for (let i = 0; i < opts.warmup + opts.repeat; i++) await session.run(feeds);
    session.endProfiling();
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
    if (files.length !== 1) throw new Error(`ORT wrote ${files.length} profiles, expected 1`);
    const events = JSON.parse(fs.readFileSync(path.join(dir, files[0]), 'utf8'));
    for (const n of nodeTimes(events, opts.warmup)) console.log(JSON.stringify(n));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(`ort_profile: ${process.argv[2]}: ${e.message}`);
  process.exit(1);
});
