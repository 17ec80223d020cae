#!/usr/bin/env node
// Times an ONNX model with ONNX Runtime (CPU), the peer kiln is compared against.
//
//   node ort_bench.js model.onnx input.npz [--threads 2] [--warmup 10] [--repeat 50] [--spin 0]
//                     [--expected expected.npz --rtol 1e-4]
//
// Session: intra-op threads = --threads, one inter-op thread, sequential execution, all graph
// optimizations, intra-op spinning off unless --spin 1. Spinning is ORT's default, but on this
// shared 2-core machine a spinning worker burns the time slice the other thread needs: resnet18
// measured 141 ms median spinning against 91 ms not, in alternating runs at load average ~6. Inputs come from the npz by ONNX input name. Prints one line in kiln run's
// --print-time format ("mean X ms  median Y ms  min Z ms  max W ms"). With --expected it also
// checks ORT's outputs against output_0, ... (max|a-b| / max|ref|) and exits 1 over --rtol.
'use strict';

const path = require('path');
const { readNpz } = require('./npz');
const { requireOrt, parseOptions, benchSession, inputFeeds } = require('./ort_session');

const ort = requireOrt('ort_bench');

function usage(msg) {
  if (msg) console.error(`ort_bench: ${msg}`);
  console.error(
    'usage: node ort_bench.js model.onnx input.npz [--threads N] [--warmup N] [--repeat N] ' +
      '[--spin 0|1] [--expected expected.npz] [--rtol R]'
  );
  process.exit(2);
}

function parseArgs(argv) {
  const defaults = { threads: 2, warmup: 10, repeat: 50, spin: 0, expected: null, rtol: 1e-4 };
  const opts = parseOptions(argv, defaults, usage, ['expected']);
  if (opts.positional.length !== 2) usage('need model.onnx and input.npz');
  if (opts.repeat < 1) usage('--repeat must be at least 1');
  return opts;
}

function relativeError(ref, got) {
  let maxDiff = 0;
  let maxRef = 0;
  for (let i = 0; i < ref.length; i++) {
    const r = Number(ref[i]);
    const d = Math.abs(r - Number(got[i]));
    if (!(d <= maxDiff)) maxDiff = d; // NaN propagates: NaN <= x is false
    maxRef = Math.max(maxRef, Math.abs(r));
  }
  return maxRef > 0 ? maxDiff / maxRef : maxDiff;
}

function checkOutputs(outputs, outputNames, expectedFile, rtol) {
  const expected = readNpz(expectedFile);
  let ok = true;
  outputNames.forEach((name, i) => {
    const key = `output_${i}`;
    const ref = expected.get(key);
    const got = outputs[name];
    if (!ref) throw new Error(`${expectedFile}: no array ${key}`);
    if (ref.dims.join(',') !== got.dims.join(',')) {
      console.log(`${key}: shape [${got.dims}] != expected [${ref.dims}]`);
      ok = false;
      return;
    }
    const err = relativeError(ref.data, got.data);
    const pass = err <= rtol;
    ok = ok && pass;
    console.log(`${key} [${got.dims}]: rel err ${err.toExponential(3)} ${pass ? 'ok' : 'FAIL'}`);
  });
  return ok;
}

function stats(times) {
  const s = [...times].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return { mean, median, min: s[0], max: s[s.length - 1] };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const [modelPath, inputPath] = opts.positional;
  const session = await benchSession(ort, modelPath, opts);
  const feeds = inputFeeds(ort, session, inputPath);

  let outputs = null;
  for (let i = 0; i < opts.warmup; i++) outputs = await session.run(feeds);
  const times = [];
  for (let i = 0; i < opts.repeat; i++) {
    const t0 = process.hrtime.bigint();
    outputs = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const t = stats(times);
  const f = (x) => x.toFixed(3);
  console.log(
    `${path.basename(path.dirname(path.resolve(modelPath)))} ort ${ort.env.versions.node}: ` +
      `mean ${f(t.mean)} ms  median ${f(t.median)} ms  min ${f(t.min)} ms  max ${f(t.max)} ms  ` +
      `(${opts.repeat} runs, ${opts.threads} threads, spin ${opts.spin})`
  );
  if (opts.expected && !checkOutputs(outputs, session.outputNames, opts.expected, opts.rtol)) {
    process.exitCode = 1;
  }
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message || e}`);
  process.exit(1);
});
