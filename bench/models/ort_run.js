#!/usr/bin/env node
// Runs an ONNX model once with ONNX Runtime (CPU) and writes every session output as JSON, for
// quantized_models.py (calibration ranges) and the QDQ end-to-end checks (ORT's outputs on the
// same file kiln builds):
//
//   node ort_run.js model.onnx input.npz out.json [--ranges 1] [--threads 2]
//
// out.json: {"<output name>": {"dims": [...], "type": "float32", "min": m, "max": M,
// "data": [...]}}; with --ranges 1 the data is left out (calibration needs min and max only).
// Inputs come from the npz by ONNX input name. Exits 2 without onnxruntime-node.
'use strict';

const fs = require('fs');
const { requireOrt, inputFeeds } = require('./ort_session');

const ort = requireOrt('ort_run');

async function main() {
  const args = process.argv.slice(2);
  const opts = { ranges: 0, threads: 2 };
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i].startsWith('--')) {
      const key = args[i].slice(2);
      if (!(key in opts) || i + 1 >= args.length) throw new Error(`bad option ${args[i]}`);
      opts[key] = Number(args[++i]);
    } else {
      pos.push(args[i]);
    }
  }
  if (pos.length !== 3) throw new Error('usage: ort_run.js model.onnx input.npz out.json');
  const [modelPath, inputPath, outPath] = pos;
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = inputFeeds(ort, session, inputPath);
  const outputs = await session.run(feeds);
  const result = {};
  for (const name of session.outputNames) {
    const t = outputs[name];
    const data = Array.from(t.data, Number);
    let min = Infinity;
    let max = -Infinity;
    for (const v of data) {
      if (v < min) min = v;
      if (v > max) max = v;
    }
    result[name] = { dims: t.dims, type: t.type, min, max };
    if (!opts.ranges) result[name].data = data;
  }
  fs.writeFileSync(outPath, JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_run: ${e.message || e}`);
  process.exit(1);
});
