#!/usr/bin/env node
// Writes internal/tokenizer/testdata/qwen3_golden.jsonl.gz: token ids from
// Hugging Face's Rust tokenizers (the npm binding, an implementation
// independent of ours) for every turn of the ShareGPT sample, a few hundred
// hard cases and random decode cases.
//
//   cd tools/goldens/tokenizer && npm install && node gen.js
//
// Each line is one JSON object:
//   {"kind":"sharegpt","conv":I,"turn":J,"id":"...","ids":[...]}  (text is read from the sample)
//   {"kind":"hard","name":"...","text":"...","ids":[...]}
//   {"kind":"decode","ids":[...],"text":"..."}
//   {"kind":"variant","variant":"...","text":"...","ids":[...],"pieces":[...]}
//     the Qwen3 vocabulary with another model family's pre-tokenizer (see
//     variants below; internal/tokenizer builds the same files), so Llama-3,
//     GPT-2 and Qwen3.5 style splitting is checked against HF too. pieces
//     are the pre-tokenizer's output (byte-level text), present for the
//     hard cases.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const { Tokenizer } = require('tokenizers');

const root = path.resolve(__dirname, '..', '..', '..');
const shared = path.resolve(root, '..', 'shared');
const tokPath = path.join(shared, 'data/tokenizers/qwen3/tokenizer.json');
const samplePath = path.join(shared, 'data/sharegpt/sharegpt_v3_sample_1000.json');
const outPath = path.join(root, 'internal/tokenizer/testdata/qwen3_golden.jsonl.gz');

// mulberry32: a small seeded PRNG so the file is reproducible.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function hardCases() {
  const cases = [];
  const add = (name, text) => cases.push({ name, text });
  // Whitespace runs in every combination the regex treats differently.
  const ws = [' ', '  ', '   ', '\t', '\t\t', '\n', '\n\n', '\r\n', '\r\n\r\n', '\r', ' \n', '\n ', ' \t\n', '\u00a0', '\u3000', '\u2028', '\u0085', '\u000b', '\f'];
  for (const w of ws) {
    add(`ws-alone ${JSON.stringify(w)}`, w);
    add(`ws-between ${JSON.stringify(w)}`, `a${w}b`);
    add(`ws-before-digit ${JSON.stringify(w)}`, `x${w}123`);
    add(`ws-before-punct ${JSON.stringify(w)}`, `x${w}!?`);
    add(`ws-trailing ${JSON.stringify(w)}`, `end${w}`);
    add(`ws-leading ${JSON.stringify(w)}`, `${w}start`);
  }
  for (let n = 1; n <= 40; n += 3) add(`spaces-${n}`, 'a' + ' '.repeat(n) + 'b');
  for (let n = 1; n <= 12; n += 2) add(`newlines-${n}`, 'line' + '\n'.repeat(n) + 'next');
  add('crlf-doc', 'first line\r\nsecond line\r\n\r\n  indented\r\n\ttabbed\r\n');
  add('code', 'def f(x):\n    return x**2  # square\n\n\nif __name__ == "__main__":\n\tprint(f(3))\n');
  add('json', '{"a": [1, 2, 3], "b": {"c": null, "d": true}}\n');
  add('markdown', '## Title\n\n- item one\n- item two\n\n```go\nfmt.Println("hi")\n```\n');
  // Digits of many lengths.
  let digits = '';
  for (let n = 1; n <= 25; n++) {
    digits += String((n * 7) % 10);
    add(`digits-${n}`, digits);
    add(`digits-spaced-${n}`, `v ${digits} units`);
  }
  add('decimal', '3.14159 2,718 1e-10 -42 +7 0x1F 1_000_000');
  add('other-digits', '٣٤٥ ۱۲۳ १२३ ½ ¾ Ⅻ ² ³ ①②');
  // Contractions in every case.
  const cons = ['s', 't', 're', 've', 'm', 'll', 'd'];
  for (const c of cons) {
    const variants = new Set([c, c.toUpperCase(), c[0].toUpperCase() + c.slice(1), c.length > 1 ? c[0] + c[1].toUpperCase() : c]);
    for (const v of variants) {
      add(`contraction '${v}`, `it'${v} here`);
      add(`contraction-end '${v}`, `word'${v}`);
      add(`contraction-space '${v}`, `x '${v}`);
    }
  }
  add('contraction-long-s', "it'ſ odd");
  add('contraction-curly', 'it’s don’t we’ll');
  add('apostrophes', "''s '' ''' 'x 'S's 'll've");
  add('contractions-sentence', "I'M SURE YOU'LL SEE THEY'RE HERE, WE'VE GOT IT'D BE OK. Don't can't won't shouldn't've");
  // Emoji, ZWJ sequences, skin tones, flags, keycaps.
  for (const e of ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🧑🏿‍💻', '🏳️‍🌈', '🇯🇵🇺🇸', '1️⃣', '❤️', '🫠', '👩🏻‍❤️‍💋‍👨🏼']) {
    add(`emoji ${e}`, e);
    add(`emoji-in-text ${e}`, `hi ${e} there${e}!`);
  }
  // CJK, Arabic, Hebrew, Indic, Thai, Korean, Cyrillic, Greek.
  add('chinese', '你好，世界！这是一个测试。人工智能正在改变世界。');
  add('japanese', 'こんにちは、世界。カタカナとひらがなと漢字。');
  add('korean', '안녕하세요 세계. 한국어 텍스트입니다.');
  add('arabic', 'مرحبا بالعالم، هذا اختبار. العربية ١٢٣');
  add('hebrew', 'שלום עולם, זה מבחן.');
  add('hindi', 'नमस्ते दुनिया। यह एक परीक्षण है।');
  add('thai', 'สวัสดีชาวโลก นี่คือการทดสอบ');
  add('russian', 'Привет, мир! Это ТЕСТ.');
  add('greek', 'Γειά σου Κόσμε! ΑΒΓ αβγ');
  add('mixed-scripts', 'English中文Русский العربية 日本語123abc');
  // Combining marks and input that NFC changes.
  add('nfc-e-acute', 'caf\u0065\u0301 re\u0301sume\u0301');
  add('nfc-hangul-jamo', '\u1100\u1161\u11a8 \u1112\u1161\u11ab');
  add('nfc-angstrom', '\u212b \u2126 \u00c5');
  add('combining-stack', 'a\u0301\u0302\u0303\u0304 z\u0336\u0336');
  add('combining-alone', '\u0301\u0302 x');
  add('devanagari-marks', 'क्षत्रिय कि की');
  add('compat-not-nfc', 'ﬁ ﬂ ① ｆｕｌｌｗｉｄｔｈ');
  // Special and added token text inside ordinary text.
  for (const s of ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>', '<|fim_prefix|>', '<|vision_pad|>']) {
    add(`special ${s}`, s);
    add(`special-in-text ${s}`, `before ${s} after`);
    add(`special-glued ${s}`, `x${s}y${s}${s}z`);
    add(`special-ws ${s}`, `\n\n${s}\n  ${s}  `);
  }
  add('special-partial', '<|im_start <|im_end| <think <|endoftext');
  add('special-nested', '<<|im_start|>|im_end|>>');
  add('chatml', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n');
  // Odd Unicode.
  add('controls', 'a\u0000b\u0001c\u001fd\u007fe');
  add('bom-zw', '\ufeffstart\u200bmid\u200czw\u200dj\u2060end');
  add('replacement', 'bad \ufffd char \ufffd\ufffd');
  add('noncharacters', '\uffff \ufffe \u{10ffff} \u{1fffe}');
  add('private-use', '\ue000\uf8ff \u{f0000}');
  add('rtl-marks', '\u200f\u202eabc\u202c\u200e');
  add('variation-selectors', '☃\ufe0f ☃\ufe0e 葛\u{e0100}');
  add('tags', '\u{1f3f4}\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}');
  add('mongolian-vs', 'a\u180eb');
  add('math-alnum', '𝐀𝐁𝐂 𝟏𝟐𝟑 ℝ ℕ');
  add('long-word', 'a'.repeat(300));
  add('long-punct', '='.repeat(500) + '\n' + '-*'.repeat(200));
  add('long-mixed-word', 'Pneumonoultramicroscopicsilicovolcanoconiosis'.repeat(20));
  add('base64', 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==');
  add('url', 'https://example.com/path/to?q=1&b=%20x#frag user@example.org');
  add('empty', '');
  // Random texts from a pool of fragments that exercise every alternative.
  const pool = ['a', 'Z', 'é', 'e\u0301', '中', '😀', '👍🏽', '1', '23', '٣', ' ', '  ', '\t', '\n', '\r\n', ' \n ', "'", "'s", "'LL", '.', ',', '!!', '(', ')', '"', '-', '_', '\u00a0', '\u3000', '<|im_end|>', '<think>', 'ab', 'The', ' the', 'ß', 'İ', 'ǅ', '\u0301', '$', '€', '#', '/', '\\', '\u200d', 'ſ'];
  const rand = rng(20240607);
  for (let k = 0; k < 400; k++) {
    const n = 1 + Math.floor(rand() * 30);
    let s = '';
    for (let i = 0; i < n; i++) s += pool[Math.floor(rand() * pool.length)];
    add(`random-${k}`, s);
  }
  return cases;
}

// byteChar is GPT-2's byte-level alphabet (byte -> character).
function byteChar() {
  const bs = [];
  for (let b = 0; b < 256; b++) if ((b >= 33 && b <= 126) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) bs.push(b);
  const map = new Array(256);
  for (const b of bs) map[b] = String.fromCodePoint(b);
  let n = 0;
  for (let b = 0; b < 256; b++) if (map[b] === undefined) map[b] = String.fromCodePoint(256 + n++);
  return map;
}

function decodeCases(tok, vocabSize) {
  const rand = rng(42);
  const cases = [];
  // Byte tokens 0x80-0xFF alone form invalid UTF-8 in many arrangements.
  const byteIds = byteChar().map((c) => tok.tokenToId(c));
  for (let k = 0; k < 300; k++) {
    const n = 1 + Math.floor(rand() * 12);
    const ids = [];
    for (let i = 0; i < n; i++) {
      const r = rand();
      if (r < 0.5) ids.push(byteIds[128 + Math.floor(rand() * 128)]);
      else if (r < 0.9) ids.push(Math.floor(rand() * vocabSize));
      else ids.push(151643 + Math.floor(rand() * 26));
    }
    cases.push(ids);
  }
  return cases;
}

const split = (regex) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false });
const byteLevel = (prefix, useRegex) => ({ type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: false, use_regex: useRegex });
const variants = {
  llama3: {
    pre: { type: 'Sequence', pretokenizers: [split("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"), byteLevel(false, false)] },
    ignoreMerges: true,
  },
  qwen35: {
    pre: { type: 'Sequence', pretokenizers: [split("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"), byteLevel(false, false)] },
  },
  gpt2: { pre: byteLevel(true, true) },
  'gpt2-noprefix': { pre: byteLevel(false, true) },
  // Added tokens with every flag HF honours (Qwen3's own set none).
  flags: { extraAdded: true },
};

const extraAdded = [
  { id: 151669, content: '[MASK]', single_word: false, lstrip: true, rstrip: false, normalized: false, special: true },
  { id: 151670, content: '<R>', single_word: false, lstrip: false, rstrip: true, normalized: false, special: true },
  { id: 151671, content: 'hello', single_word: true, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: 151672, content: 'caf\u00e9', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: 151673, content: '<both>', single_word: true, lstrip: true, rstrip: true, normalized: false, special: false },
];
const flagTexts = [
  'a [MASK] b', 'a   [MASK]b', '[MASK]', '  [MASK]  ', 'x\t\n[MASK]\n', '[MASK][MASK]', ' [MASK] [MASK] ',
  'a <R>   b', '<R>', '<R>\n\n x', 'a<R>b', '<R><R>  <R>',
  'hello', 'hello world', 'say hello.', 'sayhello', 'hellos', 'hello_x', 'é hello', '(hello)', 'hello\u0301',
  'cafe\u0301 caf\u00e9 CAFÉ', 'the café', 'cafés',
  'a <both> b', 'a<both>b', '  <both>  ', 'x <both>y', '<both>', '[MASK]<R> <both> hello café',
];

async function main() {
  const tok = Tokenizer.fromFile(tokPath);
  const enc = async (text) => (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
  const lines = [];
  const sample = JSON.parse(fs.readFileSync(samplePath, 'utf8'));
  for (let i = 0; i < sample.length; i++) {
    const conv = sample[i].conversations || [];
    for (let j = 0; j < conv.length; j++) {
      lines.push(JSON.stringify({ kind: 'sharegpt', conv: i, turn: j, id: sample[i].id, ids: await enc(conv[j].value) }));
    }
  }
  const hard = hardCases();
  for (const c of hard) lines.push(JSON.stringify({ kind: 'hard', name: c.name, text: c.text, ids: await enc(c.text) }));
  const vocabSize = tok.getVocabSize(false);
  const dec = decodeCases(tok, vocabSize);
  for (const ids of dec) lines.push(JSON.stringify({ kind: 'decode', ids, text: await tok.decode(ids, false) }));
  const base = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
  const turns = [];
  for (const c of sample.slice(0, 40)) for (const t of c.conversations || []) turns.push(t.value);
  for (const [name, v] of Object.entries(variants)) {
    const doc = { ...base, pre_tokenizer: v.pre || base.pre_tokenizer, model: { ...base.model, ignore_merges: !!v.ignoreMerges } };
    if (v.extraAdded) doc.added_tokens = base.added_tokens.concat(extraAdded);
    const vt = Tokenizer.fromString(JSON.stringify(doc));
    const pre = vt.getPreTokenizer();
    const norm = (s) => s.normalize('NFC');
    const cases = v.extraAdded ? hard.concat(flagTexts.map((text, i) => ({ name: `flags-${i}`, text }))) : hard;
    for (const c of cases) {
      const ids = (await vt.encode(c.text, null, { addSpecialTokens: false })).getIds();
      // Pre-tokenize only text without added tokens: HF splits those out first.
      const pieces = v.extraAdded || /<\|[a-z_]+\|>|<\/?(think|tool_call|tool_response)>/.test(c.text) ? undefined : pre.preTokenizeString(norm(c.text)).map((p) => p[0]);
      lines.push(JSON.stringify({ kind: 'variant', variant: name, name: c.name, text: c.text, ids, pieces }));
    }
    for (const text of turns) {
      const ids = (await vt.encode(text, null, { addSpecialTokens: false })).getIds();
      lines.push(JSON.stringify({ kind: 'variant', variant: name, text, ids }));
    }
  }
  fs.mkdirSync(path.dirname(outPath), { recursive: true });
  fs.writeFileSync(outPath, zlib.gzipSync(lines.join('\n') + '\n', { level: 9 }));
  console.log(`wrote ${outPath}: ${lines.length} cases (${hard.length} hard, ${dec.length} decode), vocab ${vocabSize}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
