#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (CPU) over N stacked samples, for the quantization
// accuracy tool (quant_accuracy.py) and the quantizer's tests:
//
//   node ort_run_samples.js model.onnx samples.npz OUT_DIR [--threads 1]
//
// samples.npz holds one array per model input with the samples along a new leading axis
// ([N, *input shape], kiln quantize's --calibration form). Each sample is run on its own;
// every output's N results are written to OUT_DIR/output_<i>.f32 (little-endian float32,
// sample after sample) with OUT_DIR/outputs.json: [{"name", "dims" (one sample's)}, ...].
'use strict';

const fs = require('fs');
const path = require('path');
const { readNpz } = require('./npz');
const { requireOrt } = require('./ort_session');

const ort = requireOrt('ort_run_samples');

async function main() {
  const argv = process.argv.slice(2);
  let threads = 1;
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--threads') threads = Number(argv[++i]);
    else pos.push(argv[i]);
  }
  if (pos.length !== 3 || !(threads >= 1)) {
    console.error('usage: node ort_run_samples.js model.onnx samples.npz OUT_DIR [--threads N]');
    process.exit(2);
  }
  const [modelPath, samplesPath, outDir] = pos;
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const arrays = readNpz(samplesPath);
  let n = -1;
  for (const name of session.inputNames) {
    const a = arrays.get(name);
    if (!a) throw new Error(`${samplesPath}: no array named '${name}' (model input)`);
    if (n >= 0 && a.dims[0] !== n)
      throw new Error(`${samplesPath}: array '${name}' stacks ${a.dims[0]} samples, not ${n}`);
    n = a.dims[0];
  }
  fs.mkdirSync(outDir, { recursive: true });
  const chunks = session.outputNames.map(() => []);
  let dims = null;
  for (let k = 0; k < n; k++) {
    const feeds = {};
    for (const name of session.inputNames) {
      const a = arrays.get(name);
      const per = a.data.length / n;
      feeds[name] = new ort.Tensor(a.type, a.data.slice(k * per, (k + 1) * per), a.dims.slice(1));
    }
    const out = await session.run(feeds);
    dims = session.outputNames.map((name) => out[name].dims);
    session.outputNames.forEach((name, i) => {
      const t = out[name];
      if (t.type !== 'float32') throw new Error(`output '${name}' is ${t.type}, not float32`);
      chunks[i].push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    });
  }
  session.outputNames.forEach((name, i) =>
    fs.writeFileSync(path.join(outDir, `output_${i}.f32`), Buffer.concat(chunks[i]))
  );
  fs.writeFileSync(
    path.join(outDir, 'outputs.json'),
    JSON.stringify(session.outputNames.map((name, i) => ({ name, dims: dims ? dims[i] : [] })))
  );
}

main().catch((e) => {
  console.error(`ort_run_samples: ${e.message || e}`);
  process.exit(1);
});
