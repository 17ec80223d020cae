// Minimal .npz reader for the ONNX Runtime benchmark: a zip of .npy files, stored or deflated,
// as numpy's savez/savez_compressed write them (zip64 extras included). Little-endian,
// C-order arrays only; anything else is an error that names the file and the array.
'use strict';

const fs = require('fs');
const zlib = require('zlib');

const DTYPES = {
  '<f4': { type: 'float32', array: Float32Array },
  '<f8': { type: 'float64', array: Float64Array },
  '<i8': { type: 'int64', array: BigInt64Array },
  '<i4': { type: 'int32', array: Int32Array },
  '|i1': { type: 'int8', array: Int8Array },
  '|u1': { type: 'uint8', array: Uint8Array },
  '|b1': { type: 'bool', array: Uint8Array },
};

function findEndOfCentralDirectory(buf, file) {
  // The EOCD record is 22 bytes plus a comment of at most 65535 bytes.
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 22 - 65535); i--) {
    if (buf.readUInt32LE(i) === 0x06054b50) return i;
  }
  throw new Error(`${file}: not a zip file (no end of central directory)`);
}

function centralDirectory(buf, file) {
  const eocd = findEndOfCentralDirectory(buf, file);
  let count = buf.readUInt16LE(eocd + 10);
  let offset = buf.readUInt32LE(eocd + 16);
  if (offset === 0xffffffff || count === 0xffff) {
    const locator = eocd - 20;
    if (locator < 0 || buf.readUInt32LE(locator) !== 0x07064b50) {
      throw new Error(`${file}: zip64 end of central directory locator missing`);
    }
    const eocd64 = Number(buf.readBigUInt64LE(locator + 8));
    count = Number(buf.readBigUInt64LE(eocd64 + 32));
    offset = Number(buf.readBigUInt64LE(eocd64 + 48));
  }
  return { count, offset };
}

// Zip64 extra field (id 1) holds, in order, whichever of these were 0xffffffff.
function applyZip64Extra(buf, start, length, entry) {
  for (let p = start; p + 4 <= start + length;) {
    const id = buf.readUInt16LE(p);
    const size = buf.readUInt16LE(p + 2);
    if (id === 1) {
      let q = p + 4;
      for (const key of ['uncompressed', 'compressed', 'localOffset']) {
        if (entry[key] === 0xffffffff) {
          entry[key] = Number(buf.readBigUInt64LE(q));
          q += 8;
        }
      }
    }
    p += 4 + size;
  }
}

function readZip(file) {
  const buf = fs.readFileSync(file);
  const { count, offset } = centralDirectory(buf, file);
  const entries = new Map();
  let p = offset;
  for (let i = 0; i < count; i++) {
    if (buf.readUInt32LE(p) !== 0x02014b50) throw new Error(`${file}: corrupt central directory`);
    const nameLen = buf.readUInt16LE(p + 28);
    const extraLen = buf.readUInt16LE(p + 30);
    const commentLen = buf.readUInt16LE(p + 32);
    const entry = {
      method: buf.readUInt16LE(p + 10),
      compressed: buf.readUInt32LE(p + 20),
      uncompressed: buf.readUInt32LE(p + 24),
      localOffset: buf.readUInt32LE(p + 42),
    };
    const name = buf.toString('utf8', p + 46, p + 46 + nameLen);
    applyZip64Extra(buf, p + 46 + nameLen, extraLen, entry);
    p += 46 + nameLen + extraLen + commentLen;

    const local = entry.localOffset;
    if (buf.readUInt32LE(local) !== 0x04034b50) throw new Error(`${file}: corrupt entry ${name}`);
    const dataStart = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const raw = buf.subarray(dataStart, dataStart + entry.compressed);
    let data;
    if (entry.method === 0) data = raw;
    else if (entry.method === 8) data = zlib.inflateRawSync(raw);
    else throw new Error(`${file}: entry ${name} uses unsupported zip method ${entry.method}`);
    entries.set(name, data);
  }
  return entries;
}

function parseNpy(data, where) {
  if (data.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${where}: not a .npy array`);
  const major = data[6];
  const headerLen = major === 1 ? data.readUInt16LE(8) : data.readUInt32LE(8);
  const headerStart = major === 1 ? 10 : 12;
  const header = data.toString('latin1', headerStart, headerStart + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${where}: unreadable .npy header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${where}: Fortran-order arrays are not supported`);
  const dtype = DTYPES[descr[1]];
  if (!dtype) throw new Error(`${where}: unsupported dtype ${descr[1]}`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const start = headerStart + headerLen;
  const bytes = count * dtype.array.BYTES_PER_ELEMENT;
  if (data.length < start + bytes) throw new Error(`${where}: truncated array data`);
  // Copy into a fresh buffer: typed arrays need aligned offsets.
  const copy = new Uint8Array(bytes);
  copy.set(data.subarray(start, start + bytes));
  return { type: dtype.type, dims, data: new dtype.array(copy.buffer) };
}

// Returns Map(name without .npy -> {type, dims, data}).
function readNpz(file) {
  const arrays = new Map();
  for (const [name, data] of readZip(file)) {
    const key = name.endsWith('.npy') ? name.slice(0, -4) : name;
    arrays.set(key, parseNpy(data, `${file}:${key}`));
  }
  return arrays;
}

module.exports = { readNpz };
