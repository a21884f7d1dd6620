/* labformer: the live translator. The book's own trained Transformer, run in the reader's
   browser, offline: this file is labformer's forward pass written out in plain JavaScript, to
   be read beside the chapters (each piece names its chapter), and the widget around it.

   The page holds a <div class="lf-live" data-lf-model="FILE"> with precomputed examples (JSON,
   made by the build with labformer.app.export.live_examples). They are shown at once. The model
   itself (FILE, written by labformer.app.export, a few MB) is loaded only when the reader presses
   the button, from next to this file, and read as data, never run: from a static server it is
   fetched and its JSON parsed; from a page opened as a file (file://), where a browser lets a page
   read no other file by itself, the reader chooses the file (an <input type="file">) and it is
   read the same way. Its SHA-256 is checked against the page's before the model speaks.
   Nothing is fetched from the network.

   A sentence typed here is translated as `labformer translate` translates it (chapter 12,
   labformer/app/carry.py): a line of several sentences sentence by sentence; numbers, clock times
   and names the model never saw carried over through placeholders; the same warnings. Each
   piece of that names the Python function it mirrors. When the model file is not the one the
   page's examples were computed with (data-lf-weights-sha256), the page says so.

   Numbers are labformer's: the test tests/cli/test_live.py runs this file in Chromium against
   PyTorch on the same checkpoint (logits, attention weights, greedy and beam outputs,
   tokenisation), and against the command line's translations and warnings on the inputs of
   tests/data/live_parity.txt. window.labformerLive exposes the pieces it calls. */
(function () {
  "use strict";

  var GLOBAL = "LABFORMER_LIVE_MODEL";  // labformer.app.export.GLOBAL
  var FORMAT = 2;  // labformer.app.export.FORMAT
  var SCRIPT = document.currentScript ? document.currentScript.src : "";

  // ------------------------------------------------------------------ Python's strings
  // Python's \w is a letter, a digit (any script) or _, \d a decimal digit of any script, and
  // its white space is str.isspace's: written out here, with str.strip, str.split and the
  // case tests that labformer.app.carry uses (str.isupper, islower, isalpha, capitalize, title).
  var W = "\\p{L}\\p{N}_";
  var SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a" +
              "\\u2028\\u2029\\u202f\\u205f\\u3000";
  var STRIP = new RegExp("^[" + SPACE + "]+|[" + SPACE + "]+$", "gu");
  var RSTRIP = new RegExp("[" + SPACE + "]+$", "u");
  var SPACES = new RegExp("[" + SPACE + "]+", "gu");

  function strip(text) { return text.replace(STRIP, ""); }  // str.strip()
  function split(text) { return text.split(SPACES).filter(Boolean); }  // str.split()
  function chars(text) { return Array.from(text); }  // code points, as Python counts them
  function first(text) { return chars(text).slice(0, 1).join(""); }  // text[:1]

  var LOWER = /[\p{Lowercase}\p{Lt}]/u, UPPER = /[\p{Uppercase}\p{Lt}]/u;
  function isUpper(text) {  // str.isupper: a cased character and no lower-case or title-case one
    var cased = false;
    return chars(text).every(function (c) {
      if (LOWER.test(c)) return false;
      cased = cased || /\p{Uppercase}/u.test(c);
      return true;
    }) && cased;
  }
  function isLower(text) {  // str.islower
    var cased = false;
    return chars(text).every(function (c) {
      if (UPPER.test(c)) return false;
      cased = cased || /\p{Lowercase}/u.test(c);
      return true;
    }) && cased;
  }
  function isAlpha(text) { return /^\p{L}+$/u.test(text); }  // str.isalpha
  // str.capitalize and str.title: the first letter (of each word, for title) in title case.
  var TITLE = { "Ǆ": "ǅ", "ǅ": "ǅ", "ǆ": "ǅ", "Ǉ": "ǈ", "ǈ": "ǈ", "ǉ": "ǈ", "Ǌ": "ǋ", "ǋ": "ǋ",
                "ǌ": "ǋ", "Ǳ": "ǲ", "ǲ": "ǲ", "ǳ": "ǲ" };
  function titleChar(c) { return TITLE[c] || c.toUpperCase(); }
  function capitalize(text) {
    var cs = chars(text);
    return cs.length ? titleChar(cs[0]) + cs.slice(1).join("").toLowerCase() : text;
  }
  function title(text) {
    var cased = false;
    return chars(text).map(function (c) {
      var out = cased ? c.toLowerCase() : titleChar(c);
      cased = /\p{Cased}/u.test(c);
      return out;
    }).join("");
  }
  // int() and float() read any script's digits: each decimal digit by its place in its run
  // of ten (Unicode encodes every script's 0 to 9 in order).
  function asciiDigits(text) {
    return text.replace(/\p{Nd}/gu, function (c) {
      var point = c.codePointAt(0), start = point;
      while (/\p{Nd}/u.test(String.fromCodePoint(start - 1))) start -= 1;
      return String((point - start) % 10);
    });
  }
  function toInt(text) { return parseInt(asciiDigits(text), 10); }
  function equal(a, b) {
    return a.length === b.length && a.every(function (x, i) { return x === b[i]; });
  }
  function unique(items) { return items.filter(function (x, i) { return items.indexOf(x) === i; }); }

  // ------------------------------------------------------------------ text (chapter 11)
  // labformer/data/text.py: NFC, typographic apostrophes read as ', white space stripped,
  // lower case, then words (hyphens inside), elided words with their apostrophe ("l'", "j'")
  // and each other symbol a token.
  var WORDS_TOKEN = new RegExp("[" + W + "]+'|[" + W + "]+(?:-[" + W + "]+)*|[^" + W + SPACE +
                               "]", "gu");
  var PUNCTUATION = { ".": 1, ",": 1, ";": 1, ":": 1, "!": 1, "?": 1 };

  // labformer.data.moses.normalize_text, and lower case where the codec folds it.
  function normalize(text, codec) {
    text = strip(text.normalize("NFC").replace(/[\u2019\u02bc]/g, "'"));
    return codec.kind === "words" || codec.lowercase ? text.toLowerCase() : text;
  }

  // TextCodec.tokenize: the "words" codec (labformer.data.tokenize), or Moses (below).
  function tokenize(text, codec) {
    if (codec.kind !== "moses") return normalize(text, codec).match(WORDS_TOKEN) || [];
    return moses(codec).tokenize(normalize(text, codec));
  }

  // TextCodec.detokenize: labformer.data.detokenize, or Moses's detokenizer.
  function detokenize(tokens, codec) {
    if (codec && codec.kind === "moses") return moses(codec).detokenize(tokens);
    var out = "";
    tokens.forEach(function (t, i) {
      out += (i === 0 || PUNCTUATION[t] || /'$/.test(tokens[i - 1]) ? "" : " ") + t;
    });
    return out;
  }

  // ------------------------------------------------------------------ Moses (chapter 12)
  // A model of one's own pairs reads and writes text with the Moses tokenizer (sacremoses,
  // labformer/data/moses.py): MosesTokenizer.tokenize(text, escape=False, protected_patterns=
  // [clock times]) and MosesDetokenizer.detokenize, rule by rule. Their data (each language's
  // non-breaking prefixes, the character classes of the rules) comes in the model file
  // (labformer.app.export.moses_tables): a Moses codec carries it as codec.moses. The Czech and
  // Finnish rules of the detokenizer are left out.
  function charClass(flat) {  // [start, end, ...] code points -> the inside of a [...]
    var out = "";
    for (var i = 0; i < flat.length; i += 2) {
      out += "\\u{" + flat[i].toString(16) + "}";
      if (flat[i + 1] > flat[i]) out += "-\\u{" + flat[i + 1].toString(16) + "}";
    }
    return out;
  }
  // sacremoses.util.is_cjk
  var CJK = [[4352, 4607], [11904, 42191], [43072, 43135], [44032, 55215], [63744, 64255],
             [65072, 65103], [65381, 65500], [94208, 101119], [110592, 110895],
             [110960, 111359], [131072, 196607]];
  function isCjk(c) {
    var point = c.codePointAt(0);
    return CJK.some(function (r) { return point >= r[0] && point <= r[1]; });
  }

  function Moses(lang, table) {
    function re(source) { return new RegExp(source, "gu"); }
    var alnum = charClass(table.alnum), alpha = charClass(table.alpha), n = charClass(table.n);
    this.lang = lang;
    this.prefixes = new Set(table.prefixes);
    this.numericOnly = new Set(table.numeric_only);
    this.alpha = new RegExp("[" + alpha + "]", "u");
    this.lower = new RegExp("^[" + charClass(table.lower) + "]$", "u");
    this.padNotAlnum = re("([^" + alnum + SPACE + "\\.'`,\\-])");  // PAD_NOT_ISALNUM
    this.commas = [[re("([^" + n + "]),"), "$1 , "], [re(",([^" + n + "])"), " , $1"],
                   [re("([" + n + "]),$"), "$1 , "]];  // COMMA_SEPARATE_1 to 3
    var A = "[" + alpha + "]", notA = "[^" + alpha + "]";
    if (lang === "en") {  // ENGLISH_SPECIFIC_APOSTROPHE
      this.apostrophes = [[re("(" + notA + ")'(" + notA + ")"), "$1 ' $2"],
                          [re("([^" + alpha + n + "])'(" + A + ")"), "$1 ' $2"],
                          [re("(" + A + ")'(" + notA + ")"), "$1 ' $2"],
                          [re("(" + A + ")'(" + A + ")"), "$1 '$2"],
                          [re("([" + n + "])'(s)"), "$1 '$2"]];
    } else if (lang === "fr" || lang === "it") {  // FR_IT_SPECIFIC_APOSTROPHE
      this.apostrophes = [[re("(" + notA + ")'(" + notA + ")"), "$1 ' $2"],
                          [re("(" + notA + ")'(" + A + ")"), "$1 ' $2"],
                          [re("(" + A + ")'(" + notA + ")"), "$1 ' $2"],
                          [re("(" + A + ")'(" + A + ")"), "$1' $2"]];
    } else {
      this.apostrophes = [[/'/g, " ' "]];  // NON_SPECIFIC_APOSTROPHE
    }
    var dAlpha = charClass(table.detok_alpha);  // the detokenizer's own classes
    this.currency = new RegExp("^[" + charClass(table.sc) + "\\(\\[\\{¿¡]+$", "u");
    this.englishContraction = new RegExp("^'[" + dAlpha + "]", "u");
    this.frenchContraction = new RegExp("[" + dAlpha + "]'$", "u");
    this.startsAlpha = new RegExp("^[" + dAlpha + "]", "u");
  }

  var PROTECT = "THISISPROTECTED";
  var CLOCK = /\p{Nd}{1,2}:\p{Nd}{2}/gu;  // labformer's protected pattern: "7:30" stays whole
  function pad3(i) { return ("00" + i).slice(-3); }

  Moses.prototype.tokenize = function (text) {
    text = text.replace(SPACES, " ").replace(/[\x00-\x1f]/g, "");
    var protect = text.match(CLOCK) || [];
    if (protect.length > 1000) {
      throw new Error("too many protected tokens: " + protect.length + " matches exceeds " +
                      "the limit of 1000");
    }
    var runs = text.match(/THISISPROTECTEDX*/g) || [], marker = PROTECT;  // unused_protect_marker
    if (runs.length) {
      var longest = Math.max.apply(null, runs.map(function (r) { return r.length; }));
      marker += new Array(longest - PROTECT.length + 2).join("X");
    }
    protect.map(function (t, i) { return [i, t]; })
      .sort(function (a, b) { return chars(b[1]).length - chars(a[1]).length; })
      .forEach(function (p) { text = text.split(p[1]).join(marker + pad3(p[0])); });
    text = strip(text).replace(this.padNotAlnum, " $1 ");
    var whole = text;  // replace_multidots: a run of k dots -> " " + "DOT" * k + "MULTI"
    text = text.replace(/\.{2,}/g, function (dots, at) {
      var m = " " + new Array(dots.length + 1).join("DOT") + "MULTI";
      return at + dots.length < whole.length ? m + " " : m;
    });
    this.commas.concat(this.apostrophes).forEach(function (rule) {
      text = text.replace(rule[0], rule[1]);
    });
    text = strip(this.nonbreaking(text).replace(SPACES, " ")).replace(/\.' ?$/, " . ' ");
    protect.forEach(function (t, i) { text = text.split(marker + pad3(i)).join(t); });
    text = text.replace(/(?:DOT)+MULTI/g, function (m) {
      return new Array((m.length - 5) / 3 + 1).join(".");
    });
    return split(text);
  };

  // handles_nonbreaking_prefixes: a final "." is split off a word unless the word is a known
  // abbreviation ("M.", "p.m."), holds a dot and a letter, or a lower-case word follows.
  Moses.prototype.nonbreaking = function (text) {
    var tokens = split(text), self = this, ends = new RegExp("^([^" + SPACE + "]+)\\.$", "u");
    tokens.forEach(function (token, i) {
      var m = ends.exec(token);
      if (!m) return;
      var prefix = m[1], next = i + 1 < tokens.length ? tokens[i + 1] : "";
      if ((prefix.indexOf(".") >= 0 && self.alpha.test(prefix)) ||
          (self.prefixes.has(prefix) && !self.numericOnly.has(prefix)) ||
          (i !== tokens.length - 1 && next && self.lower.test(first(next)))) return;
      if (self.numericOnly.has(prefix) && i + 1 < tokens.length && /^[0-9]+/.test(next)) return;
      tokens[i] = prefix + " .";
    });
    return tokens.join(" ");
  };

  var UNESCAPE = [[/&bar;/g, "|"], [/&#124;/g, "|"], [/&lt;/g, "<"], [/&gt;/g, ">"],
                  [/&bra;/g, "["], [/&ket;/g, "]"], [/&quot;/g, "\""], [/&apos;/g, "'"],
                  [/&#91;/g, "["], [/&#93;/g, "]"], [/&amp;/g, "&"]];

  // MosesDetokenizer.tokenize: which tokens join the one before or the one after.
  Moses.prototype.detokenize = function (tokens) {
    var text = (" " + tokens.join(" ") + " ").replace(/ @-@ /g, "-"), self = this;
    UNESCAPE.forEach(function (rule) { text = text.replace(rule[0], rule[1]); });
    var quotes = Object.create(null), prepend = " ", out = "", lang = this.lang;
    var words = split(text);
    words.forEach(function (token, i) {
      if (isCjk(first(token)) && lang !== "ko") {
        var cs = i > 0 ? chars(words[i - 1]) : [];
        out += (i > 0 && isCjk(cs[cs.length - 1]) ? "" : prepend) + token;
        prepend = " ";
      } else if (self.currency.test(token)) {
        out += prepend + token;
        prepend = "";
      } else if (/^[,.?!:;\\%}\])]+$/.test(token)) {
        if (lang === "fr" && /^[?!:;\\%]$/.test(token)) out += " ";
        out += token;
        prepend = " ";
      } else if (lang === "en" && i > 0 && self.englishContraction.test(token)) {
        out += token;
        prepend = " ";
      } else if ((lang === "fr" || lang === "it" || lang === "ga") && i <= words.length - 2 &&
                 self.frenchContraction.test(token) && self.startsAlpha.test(words[i + 1])) {
        out += prepend + token;
        prepend = "";
      } else if (/^['"„“`]+$/.test(token)) {
        var q = /^[„“”]+$/.test(token) ? "\"" : token;
        quotes[q] = quotes[q] || 0;
        if (quotes[q] % 2 === 0) {
          if (lang === "en" && token === "'" && i > 0 && /s$/.test(words[i - 1])) {
            out += token;  // a possessive: "the students' books"
            prepend = " ";
          } else {
            out += prepend + token;
            prepend = "";
            quotes[q] += 1;
          }
        } else {
          out += token;
          prepend = " ";
          quotes[q] += 1;
        }
      } else {
        out += prepend + token;
        prepend = " ";
      }
    });
    return strip(out.replace(/ {2,}/g, " "));
  };

  var compiled = new Map();  // one Moses per table
  function moses(codec) {
    if (!codec.moses) {
      throw new Error("this model's " + codec.lang + " text is tokenised with Moses, but its " +
                      "model file holds no Moses tables: export it again with labformer export");
    }
    if (!compiled.has(codec.moses)) compiled.set(codec.moses, new Moses(codec.lang, codec.moses));
    return compiled.get(codec.moses);
  }

  // ------------------------------------------------------------------ weights
  // labformer.app.export: every tensor of the state dict, one after the other, little-endian
  // float32 or float16, in base64.
  function half(bits) {
    var sign = bits & 0x8000 ? -1 : 1, exp = (bits >> 10) & 0x1f, frac = bits & 0x3ff;
    if (exp === 0) return sign * frac * Math.pow(2, -24);
    if (exp === 31) return frac ? NaN : sign * Infinity;
    return sign * (1 + frac / 1024) * Math.pow(2, exp - 15);
  }

  function readTensors(payload) {
    var raw = atob(payload.data), bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    var view = new DataView(bytes.buffer), size = payload.dtype === "float16" ? 2 : 4;
    var out = {};
    payload.tensors.forEach(function (entry) {
      var n = entry[1].reduce(function (a, b) { return a * b; }, 1);
      var values = new Float32Array(n), at = entry[2] * size;
      for (var j = 0; j < n; j++) {
        values[j] = size === 4 ? view.getFloat32(at + 4 * j, true)
                               : half(view.getUint16(at + 2 * j, true));
      }
      out[entry[0]] = { shape: entry[1], data: values };
    });
    return out;
  }

  // ------------------------------------------------------------------ building blocks
  // A sequence is an array of rows, one Float64Array(d_model) per position.

  // nn.Linear: y = W x + b, W (out, in) row-major.
  function linear(p, x) {
    var w = p.weight.data, out = p.weight.shape[0], inn = p.weight.shape[1];
    var y = new Float64Array(out);
    for (var o = 0; o < out; o++) {
      var s = p.bias ? p.bias.data[o] : 0, row = o * inn;
      for (var i = 0; i < inn; i++) s += w[row + i] * x[i];
      y[o] = s;
    }
    return y;
  }

  // Chapter 6: LayerNorm over the features, biased variance, eps 1e-5 (PyTorch's default).
  function layerNorm(p, x) {
    var n = x.length, mean = 0, v = 0, y = new Float64Array(n);
    for (var i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (i = 0; i < n; i++) v += (x[i] - mean) * (x[i] - mean);
    var inv = 1 / Math.sqrt(v / n + 1e-5);
    for (i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * p.weight.data[i] + p.bias.data[i];
    return y;
  }

  function add(a, b) {
    var y = new Float64Array(a.length);
    for (var i = 0; i < a.length; i++) y[i] = a[i] + b[i];
    return y;
  }

  // Chapter 2: softmax over the keys; subtracting the largest score first changes nothing
  // but keeps exp() finite.
  function softmax(scores) {
    var m = -Infinity, s = 0, out = new Float64Array(scores.length);
    for (var i = 0; i < scores.length; i++) m = Math.max(m, scores[i]);
    for (i = 0; i < scores.length; i++) { out[i] = Math.exp(scores[i] - m); s += out[i]; }
    for (i = 0; i < scores.length; i++) out[i] /= s;
    return out;
  }

  // Chapters 2-4: multi-head scaled dot-product attention of one query row on projected keys
  // and values (rows of d_model: head h owns columns h*d_k .. (h+1)*d_k - 1).
  // Returns the output row (after W_O) and the weights, one array of keys per head.
  function attend(p, cfg, query, keys, values) {
    var d = cfg.d_model, h = cfg.num_heads, dk = d / h;
    var scale = cfg.scale_scores ? 1 / Math.sqrt(dk) : 1;  // chapter 3: 1/sqrt(d_k)
    var q = linear(p.q_proj, query), mixed = new Float64Array(d), weights = [];
    for (var head = 0; head < h; head++) {
      var lo = head * dk, scores = new Float64Array(keys.length);
      for (var j = 0; j < keys.length; j++) {
        var s = 0;
        for (var c = lo; c < lo + dk; c++) s += q[c] * keys[j][c];
        scores[j] = s * scale;
      }
      var w = softmax(scores);
      for (j = 0; j < keys.length; j++) {
        for (c = lo; c < lo + dk; c++) mixed[c] += w[j] * values[j][c];
      }
      weights.push(w);
    }
    return { out: linear(p.out_proj, mixed), weights: weights };  // concat(heads) W_O
  }

  // Chapter 6: one residual sublayer, Pre-LN x + f(norm(x)) or Post-LN norm(x + f(x)).
  function residual(cfg, norm, x, f) {
    if (cfg.norm_first) {
      var branch = f(layerNorm(norm, x));
      return cfg.residual ? add(x, branch) : branch;
    }
    branch = f(x);
    return layerNorm(norm, cfg.residual ? add(x, branch) : branch);
  }

  // Chapter 7: the position-wise feed-forward network, Linear, ReLU, Linear.
  function feedForward(p, x) {
    var hidden = linear(p.linear1, x);
    for (var i = 0; i < hidden.length; i++) hidden[i] = Math.max(0, hidden[i]);
    return linear(p.linear2, hidden);
  }

  // Chapter 5: the sinusoidal table, computed in double precision, then rounded to float32
  // as labformer.positional.sinusoidal_positions does.
  function sinusoid(pos, d) {
    var row = new Float64Array(d);
    for (var i = 0; i < d; i += 2) {
      var angle = pos * Math.exp(i * (-Math.log(10000) / d));
      row[i] = Math.fround(Math.sin(angle));
      row[i + 1] = Math.fround(Math.cos(angle));
    }
    return row;
  }

  // ------------------------------------------------------------------ the model (chapter 7)
  function Model(payload) {
    if (!payload || payload.format !== FORMAT) {
      throw new Error("model file of format " + (payload && payload.format) + "; this page " +
                      "reads format " + FORMAT + ": export it again with labformer.app.export");
    }
    var t = readTensors(payload);
    this.cfg = payload.config;
    this.srcVocab = payload.src_vocab;
    this.tgtVocab = payload.tgt_vocab;
    var tables = payload.moses || {};  // a Moses codec carries its language's tables
    this.srcText = Object.assign({ moses: tables[payload.src_text.lang] }, payload.src_text);
    this.tgtText = Object.assign({ moses: tables[payload.tgt_text.lang] }, payload.tgt_text);
    this.parameters = payload.parameters;
    this.weightsSha256 = payload.weights_sha256;  // labformer.train.weights_sha256
    this.srcIndex = Object.create(null);  // no inherited names: "constructor" is a word
    for (var i = 0; i < this.srcVocab.length; i++) this.srcIndex[this.srcVocab[i]] = i;
    this.tgtIndex = Object.create(null);
    for (i = 0; i < this.tgtVocab.length; i++) this.tgtIndex[this.tgtVocab[i]] = i;
    this.carry = new Carry(this, payload.carry);
    // Nested objects named as the state dict: p.encoder.layers[0].self_attn.q_proj.weight
    var root = {};
    Object.keys(t).forEach(function (name) {
      var node = root, parts = name.split(".");
      parts.slice(0, -1).forEach(function (part) { node = node[part] = node[part] || {}; });
      node[parts[parts.length - 1]] = t[name];
    });
    this.p = root;
    this.pe = [];
  }

  Model.prototype.position = function (pos) {
    var cfg = this.cfg;
    if (pos >= cfg.max_len) throw new Error("position " + pos + " beyond max_len " + cfg.max_len);
    if (cfg.positional === "learned") {
      var d = cfg.d_model, w = this.p.positions.embedding.weight.data;
      return Float64Array.from(w.subarray(pos * d, (pos + 1) * d));
    }
    if (cfg.positional === "none") return null;
    if (!this.pe[pos]) this.pe[pos] = sinusoid(pos, cfg.d_model);
    return this.pe[pos];
  };

  // Chapters 5 and 7: embedding * sqrt(d_model) + position.
  Model.prototype.embed = function (table, id, pos, positions) {
    var d = this.cfg.d_model, w = table.weight.data, x = new Float64Array(d);
    var pe = positions ? this.position(pos) : null, scale = Math.sqrt(d);
    for (var i = 0; i < d; i++) x[i] = w[id * d + i] * scale + (pe ? pe[i] : 0);
    return x;
  };

  Model.prototype.srcIds = function (text) {
    var self = this, tokens = tokenize(text, this.srcText);
    var ids = tokens.map(function (t) {
      return t in self.srcIndex ? self.srcIndex[t] : self.cfg.unk_id;
    });
    return { tokens: tokens, ids: ids.concat([this.cfg.eos_id]) };  // ends with EOS
  };

  // The encoder (chapter 7): src ids -> memory rows, and every layer's self-attention.
  Model.prototype.encode = function (ids) {
    var self = this, cfg = this.cfg;
    var x = ids.map(function (id, i) {
      return self.embed(self.p.src_embed, id, i, cfg.encoder_positions);
    });
    var attention = [];
    this.p.encoder.layers && Object.keys(this.p.encoder.layers).forEach(function (n) {
      var L = self.p.encoder.layers[n], maps = [];
      var xn = x.map(function (row) { return cfg.norm_first ? layerNorm(L.sublayer1.norm, row) : row; });
      var keys = xn.map(function (r) { return linear(L.self_attn.k_proj, r); });
      var values = xn.map(function (r) { return linear(L.self_attn.v_proj, r); });
      x = x.map(function (row) {
        return residual(cfg, L.sublayer1.norm, row, function () {
          var a = attend(L.self_attn, cfg, cfg.norm_first ? layerNorm(L.sublayer1.norm, row) : row,
                         keys, values);
          maps.push(a.weights);
          return a.out;
        });
      });
      x = x.map(function (row) {
        return residual(cfg, L.sublayer2.norm, row, function (y) { return feedForward(L.ffn, y); });
      });
      attention.push(heads(maps));
    });
    if (cfg.norm_first) x = x.map(function (row) { return layerNorm(self.p.encoder.norm, row); });
    return { memory: x, attention: attention };
  };

  // weights[query][head][key] -> [head][query][key], as labformer records them (B, h, T, S).
  function heads(byQuery) {
    if (!byQuery.length) return [];
    return byQuery[0].map(function (_, h) {
      return byQuery.map(function (q) { return Array.from(q[h]); });
    });
  }

  // Chapter 10: the key/value cache. Cross-attention keys and values are projected from the
  // memory once; each decoder layer's self-attention keeps the rows of the positions done.
  Model.prototype.newCache = function (memory) {
    var layers = this.p.decoder.layers, n = Object.keys(layers).length, out = [];
    for (var i = 0; i < n; i++) {
      var L = layers[i];
      out.push({
        crossK: memory.map(function (r) { return linear(L.cross_attn.k_proj, r); }),
        crossV: memory.map(function (r) { return linear(L.cross_attn.v_proj, r); }),
        selfK: [], selfV: []
      });
    }
    return { layers: out, offset: 0 };
  };

  // A copy whose self-attention rows are shared (rows never change once cached): what a beam
  // hypothesis inherits from its parent (DecoderCache.reorder).
  function forkCache(cache) {
    return {
      offset: cache.offset,
      layers: cache.layers.map(function (l) {
        return { crossK: l.crossK, crossV: l.crossV, selfK: l.selfK.slice(), selfV: l.selfV.slice() };
      })
    };
  }

  // The decoder (chapters 8 and 10): one new token at position cache.offset -> logits over the
  // target vocabulary; its self-attention and cross-attention weights, layer by layer.
  Model.prototype.step = function (token, cache) {
    var self = this, cfg = this.cfg, x = this.embed(this.p.tgt_embed, token, cache.offset, true);
    var selfMaps = [], crossMaps = [];
    cache.layers.forEach(function (c, n) {
      var L = self.p.decoder.layers[n];
      x = residual(cfg, L.sublayer1.norm, x, function (y) {
        c.selfK.push(linear(L.self_attn.k_proj, y));  // this position's key and value join
        c.selfV.push(linear(L.self_attn.v_proj, y));  // the cache: no mask needed (ch. 8)
        var a = attend(L.self_attn, cfg, y, c.selfK, c.selfV);
        selfMaps.push(a.weights);
        return a.out;
      });
      x = residual(cfg, L.sublayer2.norm, x, function (y) {
        var a = attend(L.cross_attn, cfg, y, c.crossK, c.crossV);
        crossMaps.push(a.weights);
        return a.out;
      });
      x = residual(cfg, L.sublayer3.norm, x, function (y) { return feedForward(L.ffn, y); });
    });
    if (cfg.norm_first) x = layerNorm(this.p.decoder.norm, x);
    cache.offset += 1;
    return { logits: linear(this.p.generator, x), self: selfMaps, cross: crossMaps };
  };

  // Chapter 9: log-probabilities of the next token; PAD and BOS are never generated.
  Model.prototype.logProbs = function (logits) {
    var m = -Infinity, s = 0, out = new Float64Array(logits.length);
    for (var i = 0; i < logits.length; i++) m = Math.max(m, logits[i]);
    for (i = 0; i < logits.length; i++) s += Math.exp(logits[i] - m);
    var lse = m + Math.log(s);
    for (i = 0; i < logits.length; i++) out[i] = logits[i] - lse;
    out[this.cfg.pad_id] = -Infinity;
    out[this.cfg.bos_id] = -Infinity;
    return out;
  };

  // Teacher forcing (chapter 9): the logits and attention of every position of tgtIn (BOS
  // first), through the cache; what PyTorch's model(src, tgt_in) computes at once.
  Model.prototype.forced = function (srcIds, tgtIn) {
    var enc = this.encode(srcIds), cache = this.newCache(enc.memory), rows = [];
    var self = this;
    tgtIn.forEach(function (tok) { rows.push(self.step(tok, cache)); });
    var layers = rows.length ? rows[0].cross.length : 0, T = rows.length;
    function collect(key) {
      var out = [];
      for (var l = 0; l < layers; l++) {
        out.push(rows[0][key][l].map(function (_, h) {
          return rows.map(function (r) {  // pad each query's keys to T (causal: zeros)
            var w = Array.from(r[key][l][h]);
            while (key === "self" && w.length < T) w.push(0);
            return w;
          });
        }));
      }
      return out;
    }
    return { logits: rows.map(function (r) { return Array.from(r.logits); }),
             encoder: enc.attention, self: collect("self"), cross: collect("cross") };
  };

  // Translator.translate_detailed's output limit: twice the source's ids (EOS included) + 10.
  Model.prototype.limit = function (srcIds) {
    return Math.min(this.cfg.max_len, 2 * srcIds.length + 10);
  };

  function argmax(a) {
    var best = 0;
    for (var i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
    return best;
  }

  // Chapter 10: greedy decoding, the most probable token at every step, until EOS.
  Model.prototype.greedy = function (srcIds) {
    var enc = this.encode(srcIds), cache = this.newCache(enc.memory), limit = this.limit(srcIds);
    var tokens = [], cross = [], token = this.cfg.bos_id;
    for (var t = 0; t < limit; t++) {
      var r = this.step(token, cache);
      token = argmax(this.logProbs(r.logits));
      tokens.push(token);
      cross.push(r.cross);
      if (token === this.cfg.eos_id) break;
    }
    // cross[position][layer][head][key] -> [layer][head][position][key]
    var byLayer = cross.length ? cross[0].map(function (_, l) {
      return cross[0][l].map(function (_, h) {
        return cross.map(function (c) { return Array.from(c[l][h]); });
      });
    }) : [];
    return { tokens: tokens, cross: byLayer, encoder: enc.attention };
  };

  // GNMT's length penalty ((5 + L) / 6)^alpha (chapter 10; labformer.decoding).
  function penalty(length, alpha) { return Math.pow((5 + length) / 6, alpha); }

  // Chapter 10: beam search, as labformer.decoding.beam_search for one sentence. At each step
  // every live hypothesis proposes every token; an EOS candidate ranked among the best K ends
  // a hypothesis; the best K others live on. The search stops when K have ended and no live
  // one can still beat the worst of them, or at the limit (unfinished ones then compete).
  Model.prototype.beam = function (srcIds, K, alpha) {
    var cfg = this.cfg, enc = this.encode(srcIds), limit = this.limit(srcIds);
    var live = [{ tokens: [], lp: 0, cache: this.newCache(enc.memory) }];
    var finished = [], steps = [];
    function score(lp, length) { return lp / penalty(length, alpha); }
    for (var t = 1; t <= limit; t++) {
      var cands = [], self = this;
      live.forEach(function (hyp, k) {
        var lp = self.logProbs(self.step(hyp.tokens.length ? hyp.tokens[hyp.tokens.length - 1]
                                                           : cfg.bos_id, hyp.cache).logits);
        for (var v = 0; v < lp.length; v++) {
          if (lp[v] > -Infinity) cands.push({ k: k, v: v, lp: hyp.lp + lp[v] });
        }
      });
      // Highest first; ties by position in the (K, V) table, as a stable top-k would keep.
      cands.sort(function (a, b) { return b.lp - a.lp || a.k - b.k || a.v - b.v; });
      var kth = cands.length >= K ? cands[K - 1].lp : -Infinity;
      var ended = [], next = [];
      cands.forEach(function (c) {
        if (c.v === cfg.eos_id) {
          if (c.lp >= kth) ended.push(c);
        } else if (next.length < K) {
          next.push(c);
        }
      });
      ended.sort(function (a, b) { return a.k - b.k; });  // labformer adds them by parent
      ended.forEach(function (c) {
        var tokens = live[c.k].tokens.concat([cfg.eos_id]);
        finished.push({ tokens: tokens, score: score(c.lp, t), log_prob: c.lp, finished: true });
      });
      steps.push(next.map(function (c) { return { parent: c.k, token: c.v, lp: c.lp }; }));
      live = next.map(function (c) {
        return { tokens: live[c.k].tokens.concat([c.v]), lp: c.lp, cache: forkCache(live[c.k].cache) };
      });
      finished.sort(function (a, b) { return b.score - a.score; });  // stable, as Python's
      finished.length = Math.min(finished.length, K);
      if (!live.length) break;
      if (finished.length >= K && live[0].lp / penalty(limit, alpha) <= finished[K - 1].score) break;
      if (t === limit) {
        live.forEach(function (h) {
          finished.push({ tokens: h.tokens, score: score(h.lp, t), log_prob: h.lp, finished: false });
        });
        break;
      }
    }
    finished.sort(function (a, b) { return b.score - a.score; });
    return { hypotheses: finished.slice(0, K), steps: steps };
  };

  Model.prototype.words = function (ids) {
    var out = [];
    for (var i = 0; i < ids.length; i++) {
      if (ids[i] === this.cfg.eos_id) break;
      if (ids[i] !== this.cfg.pad_id && ids[i] !== this.cfg.bos_id) out.push(this.tgtVocab[ids[i]]);
    }
    return out;
  };

  Model.prototype.translate = function (text, mode, K, alpha) {
    var src = this.srcIds(text), self = this;
    if (!src.tokens.length) throw new RangeError("empty");
    if (src.ids.length > this.cfg.max_len) throw new RangeError("long");
    var started = performance.now(), g = this.greedy(src.ids), b = null;
    if (mode === "beam") b = this.beam(src.ids, K, alpha);
    var best = b ? b.hypotheses[0].tokens : g.tokens;
    var tgt = g.tokens.map(function (id) { return self.tgtVocab[id]; });
    return {
      source: text,
      src_tokens: src.tokens.map(function (t) { return t in self.srcIndex ? t : "<unk>"; })
        .concat(["<eos>"]),
      unknown: src.tokens.filter(function (t) { return !(t in self.srcIndex); }),
      text: detokenize(this.words(best), this.tgtText),
      greedy: detokenize(this.words(g.tokens), this.tgtText),
      tgt_tokens: tgt,
      cross: g.cross,
      beam: b && {
        width: K, alpha: alpha,
        hypotheses: b.hypotheses.map(function (h) {
          return { text: detokenize(self.words(h.tokens), self.tgtText), score: h.score, log_prob: h.log_prob,
                   finished: h.finished, tokens: h.tokens };
        })
      },
      ms: performance.now() - started
    };
  };


  // carry.token_scores: the log-probability the model gives each token of ``output`` (EOS
  // included) as the translation of ``source``, teacher-forced (chapter 9), nothing masked.
  Model.prototype.tokenScores = function (source, output) {
    var cfg = this.cfg, self = this;
    function ids(tokens, index) {
      return tokens.map(function (t) { return t in index ? index[t] : cfg.unk_id; })
        .concat([cfg.eos_id]).slice(0, cfg.max_len);
    }
    var src = ids(tokenize(source, this.srcText), this.srcIndex);
    var tgt = ids(output ? tokenize(output, this.tgtText) : [], this.tgtIndex);
    var rows = this.forced(src, [cfg.bos_id].concat(tgt.slice(0, -1))).logits;
    return rows.map(function (logits, t) {
      var m = Math.max.apply(null, logits), s = 0;
      logits.forEach(function (x) { s += Math.exp(x - m); });
      return logits[tgt[t]] - m - Math.log(s);  // log_softmax, picked
    });
  };

  // ------------------------------------------------------------------ carrying over (chapter 12)
  // labformer/app/carry.py, function by function: what `labformer translate` does around the
  // model. A line is split into sentences (split_sentences); each is read with the numbers,
  // clock times and unknown words replaced by ones the model knows (Carry.prepare), translated,
  // and the source's put back (Carry.restore), another placeholder tried when the model drops
  // one (_translate_pieces); then the warnings (assess). The lists Carry reads off the
  // vocabularies come in the model file (Carry.tables), so they are Python's own.
  var ND = "\\p{Nd}";
  function whole(source) { return new RegExp("^(?:" + source + ")$", "u"); }  // re.fullmatch
  var INT = whole(ND + "+"), DECIMAL = whole(ND + "+[.,]" + ND + "+");
  var THOUSANDS = whole(ND + "{3}"), GROUP = whole(ND + "{2,4}");
  var THOUSANDS_DECIMAL = whole(ND + "{3}[.,]" + ND + "+");  // the last group of "1 234,56"
  var GLUED_TIME = whole("(" + ND + "{1,2})h(" + ND + "{2})?");  // French "14h30", "7h30", "9h"
  var INVISIBLE = /^\p{Cf}+$/u;  // zero-width and right-to-left marks
  var ORDINAL = whole("(" + ND + "+)(?:er|re|ère|e|ème|eme|è|nd|nde)");  // 1er, 2e, 3ème
  var DATE = whole(ND + "{1,2}/" + ND + "{1,2}/" + ND + "{2,4}");  // 03/04/2025
  var MINUS = ["-", "\u2212", "\u2013"];
  var HOUR_MARKS = ["h", "h."];
  var PERIODS = [[["du", "matin"], "a.m."], [["de", "la", "nuit"], "a.m."],
                 [["de", "l'", "après-midi"], "p.m."], [["du", "soir"], "p.m."]];
  var STOPS = ".?!…";
  var OUT_TIME = whole("(" + ND + "{1,2}):(" + ND + "{2})");
  var OUT_NUMBER = whole("(" + ND + "{1,3}(?:," + ND + "{3})+(?:\\." + ND + "+)?|" + ND +
                         "+(?:\\." + ND + "+)?)(-[" + W + "]+)?");
  var OUT_ORDINAL = whole(ND + "+(?:st|nd|rd|th)");
  var MERIDIEM = ["a.m.", "p.m."];
  var RETRIES = 2;
  var SENTENCE_END = new RegExp("[.!?…]+(?:[" + SPACE + "]*[»\"”)\\]])?(?=[" + SPACE +
                                "]+[«\"“(\\[]?[" + SPACE + "]*[\\p{L}\\p{Nl}\\p{No}])", "gu");
  var ABBREVIATIONS = new Set(("M Mme Mlle Mmes MM Dr Pr St Ste Mr Mrs Ms etc cf p ex env " +
                               "av apr J.-C n°").split(" "));
  var WORD = new RegExp("[" + W + "]", "u");  // carry._WORD
  var LOW_TOKEN = -1.0, LOW_SCORE = -0.5, LENGTH_RATIO = 2.0;

  // english_ordinal: 1 -> 1st, 2 -> 2nd, 11 -> 11th, 21 -> 21st.
  function englishOrdinal(n) {
    var suffix = [11, 12, 13].indexOf(n % 100) >= 0 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" })[n % 10] || "th";
    return n + suffix;
  }

  // split_sentences: after . ! ? or … followed by a letter, not after a title (M., Dr, etc.).
  function splitSentences(text) {
    var pieces = [], start = 0, m;
    SENTENCE_END.lastIndex = 0;
    while ((m = SENTENCE_END.exec(text))) {
      var before = split(text.slice(start, m.index)), word = before.length ? before[before.length - 1] : "";
      if (m[0].charAt(0) === "." && (ABBREVIATIONS.has(word) || (chars(word).length === 1 && isUpper(word)))) {
        continue;
      }
      pieces.push(strip(text.slice(start, m.index + m[0].length)));
      start = m.index + m[0].length;
    }
    pieces.push(strip(text.slice(start)));
    return pieces.filter(Boolean);
  }

  function hasWord(text) { return /[\p{L}\p{N}]/u.test(text); }  // has_word

  function numberValue(token) { return parseFloat(asciiDigits(token).replace(",", ".")); }

  // _shape: what a placeholder must share with a number (digits of a leading zero's number,
  // digits after the decimal mark), or null for a token that is not a number.
  function shape(token) {
    if (INT.test(token)) return [token.charAt(0) === "0" && chars(token).length > 1 ? chars(token).length : 0, 0];
    if (!DECIMAL.test(token)) return null;
    var parts = token.split(/[.,]/), before = chars(parts[0]);
    return [before[0] === "0" && before.length > 1 ? before.length : 0, chars(parts[1]).length];
  }

  function thousands(digits) {  // f"{int(digits):,}"
    digits = asciiDigits(digits).replace(/^0+(?=\d)/, "");
    return digits.replace(/\B(?=(\d{3})+$)/g, ",");
  }

  // min(items, key=...): the first smallest, by a comparison of keys (tuples compare in order).
  function least(items, key) {
    function cmp(a, b) {
      for (var i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
      return 0;
    }
    var best = null, bestKey = null;
    items.forEach(function (x) {
      var k = key(x);
      if (best === null || cmp(k, bestKey) < 0) { best = x; bestKey = k; }
    });
    return best;
  }

  // NumberGroup.clock: the time as text and the a.m./p.m. to write after it (or null): the
  // source's half of the day ("du soir"), else the 24-hour clock's where the model wrote one.
  function clock(group, meridiem) {
    var hour = group.hour, period = group.text || null;
    function mm(m) { return ("0" + m).slice(-2); }
    if (meridiem === null && period === null) {
      return [group.sign + (group.minute === null ? hour + ":00" : hour + ":" + mm(group.minute)), null];
    }
    if (period === null) period = hour % 24 < 12 ? "a.m." : "p.m.";
    else if (period === "p.m." && hour < 12) hour += 12;
    hour = hour % 12 || 12;
    return [group.sign + (group.minute === null ? String(hour) : hour + ":" + mm(group.minute)), period];
  }

  function NumberGroup(kind, fields) {
    return Object.assign({ kind: kind, text: "", hour: 0, minute: null, width: 1, sign: "" }, fields);
  }

  // Carry: placeholders around one model's vocabularies (tables: Carry.tables).
  function Carry(model, tables) {
    this.src = model.srcIndex;
    this.tgt = model.tgtIndex;
    this.srcText = model.srcText;
    this.tgtText = model.tgtText;
    this.numbers = tables.numbers;
    this.names = tables.names;
    this.clocks = tables.clocks;
    this.decimalComma = tables.decimal_comma;
    this.ordinals = tables.ordinals;
    this.nameSet = new Set(tables.name_set);
    this.copyable = new Set(tables.names);
  }

  // Carry.known_case: the vocabulary's spelling of a word (je, JE -> Je at a sentence's start).
  Carry.prototype.knownCase = function (token, isFirst, shouting) {
    var variants = [token, token.toLowerCase(), capitalize(token), title(token)], src = this.src;
    if (isFirst && (isLower(token) || isUpper(token))) variants = [capitalize(token)].concat(variants);
    else if (shouting) variants = [token.toLowerCase(), capitalize(token), token];
    for (var i = 0; i < variants.length; i++) if (variants[i] in src) return variants[i];
    return token;
  };

  // Carry.nearest_number: the known number of the same shape closest in value (below a bound).
  Carry.prototype.nearestNumber = function (token, below) {
    if (below === undefined) below = Infinity;
    var want = shape(token), numbers = this.numbers.filter(function (t) { return numberValue(t) < below; });
    if (!numbers.length) numbers = this.numbers;
    var same = numbers.filter(function (t) {
      var s = shape(t);
      return want !== null && s[0] === want[0] && s[1] === want[1];
    });
    if (!same.length) {  // another shape of the same kind: an integer for an integer
      same = numbers.filter(function (t) { return (shape(t) || [0, 0])[1] === (want || [0, 0])[1]; });
    }
    if (!same.length) return null;
    var value = numberValue(token);
    return least(same, function (t) { return [Math.abs(numberValue(t) - value), t]; });
  };

  // Carry._format: a number in the target's form (7,25 -> 7.25; 2 000 -> 2,000).
  Carry.prototype.format = function (tokens) {
    if (tokens.length > 1) {  // thousands groups, perhaps with decimals: "1 234,56"
      var joined = tokens.join(""), decimal = /[.,]/.exec(tokens[tokens.length - 1]);
      if (!decimal) return thousands(joined);
      var parts = joined.split(/[.,]/);
      return thousands(parts[0]) + (this.tgtText.lang === "en" ? "." : decimal[0]) + parts[1];
    }
    var token = tokens[0];
    if (this.decimalComma && this.tgtText.lang === "en" && token.indexOf(",") >= 0) return token.replace(/,/g, ".");
    return token;
  };

  // Carry.prepare: the sentence as the model should read it, and what to put back afterwards.
  Carry.prototype.prepare = function (sentence, skip) {
    var tokens = tokenize(sentence, this.srcText), src = this.src, tgt = this.tgt;
    var prepared = { source: sentence, text: sentence, numbers: [], names: new Map(), unknown: [],
                     added_stop: null, kept: [], copied: [], notes: [] };
    var out = [], taken = new Set(tokens);
    var names = this.names.filter(function (n) { return !taken.has(n); }).slice(skip || 0), next = 0;
    var letters = tokens.filter(function (t) { return /\p{L}/u.test(t); });
    var shouting = letters.length > 1 && letters.every(isUpper);
    var copies = new Map();  // source word -> its placeholder
    var i = 0;
    while (i < tokens.length) {
      var token = tokens[i];
      if (INVISIBLE.test(token)) {  // an invisible mark: not for the model, but named
        prepared.notes.push("left out an invisible character (" + Array.from(token).map(function (c) {
          return "U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
        }).join(" ") + ")");
        i += 1;
        continue;
      }
      var took = this.number(tokens, i, prepared, out);
      if (took) { i += took; continue; }
      // A sentence starts here: after nothing, a full stop, an opening quote, a colon.
      var isFirst = i === 0 || ["«", "\"", ":", ".", "!", "?", "…", "("].indexOf(tokens[i - 1]) >= 0;
      var word = this.knownCase(token, isFirst, shouting);
      var capital = isUpper(first(token));
      if (!isFirst && !shouting && capital && !(token in src) && /\p{L}/u.test(token)) {
        word = token;  // a capital inside a sentence: a name (Blanche), not "blanche"
      }
      if (word in src && !isFirst && !shouting && capital && isAlpha(token) && token in tgt) {
        prepared.kept.push(token);  // a name the model knows: it must come back
      }
      if (this.copyable.has(word)) prepared.copied.push([token, word]);  // written as read
      if (!(word in src) && /[\p{L}\p{N}]/u.test(word)) {
        if (!copies.has(token) && next < names.length) {
          copies.set(token, names[next]);
          prepared.names.set(names[next++], shouting ? token.toLowerCase() : token);
        }
        if (copies.has(token)) word = copies.get(token);
        else prepared.unknown.push(token);
      } else if (!(word in src)) {
        prepared.unknown.push(token);  // a symbol it does not know (€, an emoji)
      }
      out.push(word);
      i += 1;
    }
    var last = out.length ? out[out.length - 1] : null;
    if (last !== null && !chars(last).some(function (c) { return STOPS.indexOf(c) >= 0; }) &&
        last !== "»" && last !== "\"" && "." in src) {
      out.push(".");
      prepared.added_stop = ".";
    }
    if (!equal(out, tokens)) prepared.text = this.join(out, sentence);
    return prepared;
  };

  // Carry._number: the number that starts at tokens[i], if any; the tokens it took (0: none).
  Carry.prototype.number = function (tokens, i, prepared, out) {
    var token = tokens[i], nxt = i + 1 < tokens.length ? tokens[i + 1] : "", src = this.src;
    if (MINUS.indexOf(token.charAt(0)) >= 0 && chars(token).length > 1 && shape(token.slice(1)) !== null) {
      return this.signed(token.charAt(0), [token.slice(1)].concat(tokens.slice(i + 1)), prepared, out);
    }
    if (MINUS.indexOf(token) >= 0 && shape(nxt) !== null && (i === 0 || shape(tokens[i - 1]) === null)) {
      return 1 + this.signed(token, tokens.slice(i + 1), prepared, out);  // a sign, not "5 - 3"
    }
    var date = tokens.slice(i, i + 5).join(""), slashes = [tokens[i + 1], tokens[i + 3]];
    if (DATE.test(token) || (i + 3 < tokens.length && slashes[0] === "/" && slashes[1] === "/" && DATE.test(date))) {
      var text = DATE.test(token) ? token : date;
      prepared.numbers.push(NumberGroup("date", { text: text }));
      prepared.notes.push("the date " + text + " is written as in French, day/month/year " +
                          "(in the US it reads month/day)");
      var day = text.split("/")[0];
      out.push(day in src ? day : this.nearestNumber(day) || day);
      return text === token ? 1 : 5;
    }
    var ordinal = ORDINAL.exec(token);
    if (ordinal && this.tgtText.lang === "en") {
      var value = toInt(ordinal[1]);
      prepared.numbers.push(NumberGroup("ordinal", { text: englishOrdinal(value) }));
      var closest = least(this.ordinals, function (o) { return [Math.abs(o[0] - value), o[0], o[1]]; });
      out.push(token in src || closest === null ? token : closest[1]);
      return 1;
    }
    var glued = GLUED_TIME.exec(token);
    if (glued && toInt(glued[1]) <= 24 && (glued[2] === undefined || toInt(glued[2]) < 60)) {
      // "14h30" is "14 h 30": the model reads it spaced, as it learned it
      var spaced = [glued[1], "h"].concat(glued[2] === undefined ? [] : [glued[2]]);
      return this.time(spaced.concat(tokens.slice(i + 1)), 0, prepared, out) - spaced.length + 1;
    }
    if (shape(token) === null) return 0;
    var j = i + 1;  // "2 000 000": one number, written 2,000,000
    var phone = token.charAt(0) === "0" && chars(token).length > 1 && INT.test(token);
    if (phone) {  // "06 12 34 56 78", "01 234 567": digit groups, kept as written
      while (j < tokens.length && GROUP.test(tokens[j])) j += 1;
    } else if (INT.test(token) && chars(token).length <= 3) {
      while (j < tokens.length && THOUSANDS.test(tokens[j])) j += 1;
      if (j < tokens.length && THOUSANDS_DECIMAL.test(tokens[j])) j += 1;  // "1 234,56"
    }
    var group = tokens.slice(i, j), after = j < tokens.length ? tokens[j] : "", self = this;
    if (group.length === 1 && INT.test(token) && toInt(token) <= 24 && HOUR_MARKS.indexOf(after) >= 0) {
      return this.time(tokens, i, prepared, out);
    }
    if (phone && group.length > 1) {
      prepared.numbers.push(NumberGroup("number", { text: group.join(" "), width: group.length }));
      group.forEach(function (t) { out.push(t in src ? t : self.nearestNumber(t) || t); });
      return group.length;
    }
    prepared.numbers.push(NumberGroup("number", { text: this.format(group) }));
    if (group.every(function (t) { return t in src; })) {
      group.forEach(function (t) { out.push(t); });
    } else {
      out.push(this.nearestNumber(group.length === 1 ? group[0] : group.join("")) || group[0]);
    }
    return group.length;
  };

  // Carry._signed: a minus sign before a number, a time or a date: kept before it.
  Carry.prototype.signed = function (sign, tokens, prepared, out) {
    var taken = this.number(tokens, 0, prepared, out), k = prepared.numbers.length - 1;
    var group = prepared.numbers[k];
    if (group.kind === "time") prepared.numbers[k] = Object.assign({}, group, { sign: sign });  // "-7 h 30"
    else prepared.numbers[k] = Object.assign({}, group, { text: sign + group.text });
    return taken;
  };

  // Carry._time: a clock time "10 h", "10 h 15", perhaps followed by "du matin" / "du soir".
  Carry.prototype.time = function (tokens, i, prepared, out) {
    var token = tokens[i], mark = tokens[i + 1], src = this.src, self = this;
    var minuteTok = i + 2 < tokens.length ? tokens[i + 2] : "";
    var hasMinute = mark === "h" && whole(ND + "{2}").test(minuteTok) && toInt(minuteTok) < 60;
    var end = i + 2 + (hasMinute ? 1 : 0);
    var period = "";
    for (var p = 0; p < PERIODS.length; p++) {
      if (equal(tokens.slice(end, end + PERIODS[p][0].length), PERIODS[p][0])) { period = PERIODS[p][1]; break; }
    }
    prepared.numbers.push(NumberGroup("time", { text: period, hour: toInt(token),
                                                minute: hasMinute ? toInt(minuteTok) : null }));
    var known = token in src && minuteTok in src;
    if (hasMinute && !known && this.clocks.length) {
      var wanted = 60 * (toInt(token) % 12) + toInt(minuteTok);
      var c = least(this.clocks, function (c) {
        return [Math.abs(60 * (c[0] % 12) + toInt(c[1]) - wanted), c[0], c[1]];
      });
      out.push(String(c[0]), mark, c[1]);
      return end - i;
    }
    tokens.slice(i, end).forEach(function (t, k) {
      var near = HOUR_MARKS.indexOf(t) >= 0 || t in src ? null : self.nearestNumber(t, k === 0 ? 25 : 60);
      out.push(near || t);
    });
    return end - i;
  };

  // Carry._join: text that the source codec reads back as exactly these tokens.
  Carry.prototype.join = function (tokens, fallback) {
    var tries = [detokenize(tokens, this.srcText), tokens.join(" ")];
    for (var i = 0; i < tries.length; i++) if (equal(tokenize(tries[i], this.srcText), tokens)) return tries[i];
    return fallback;
  };

  // Carry.restore: the source's numbers and words put back into the model's output.
  Carry.prototype.restore = function (prepared, output) {
    var tokens = output ? tokenize(output, this.tgtText) : [];
    function of(kinds) { return prepared.numbers.filter(function (g) { return kinds.indexOf(g.kind) >= 0; }); }
    var times = of(["time"]), numbers = of(["number", "date"]), ordinals = of(["ordinal"]);
    var lost = [], out = [], i = 0;
    while (i < tokens.length) {
      var token = tokens[i], nxt = i + 1 < tokens.length ? tokens[i + 1] : null;
      var meridiem = MERIDIEM.indexOf(nxt) >= 0 ? nxt : null;
      var plain = OUT_NUMBER.exec(token);
      if ((OUT_TIME.test(token) || (plain && meridiem)) && times.length) {
        var c = clock(times.shift(), meridiem);
        out.push(c[0]);
        i += meridiem ? 2 : 1;
        if (c[1]) {
          out.push(c[1]);
          if (i < tokens.length && tokens[i] === ".") i += 1;  // "9 p.m.", not "9 p.m.."
        }
        continue;
      }
      if (OUT_ORDINAL.test(token) && ordinals.length) {
        out.push(ordinals.shift().text);
        i += 1;
        continue;
      }
      if (plain && numbers.length) {
        var group = numbers.shift();
        out.push(group.text + (plain[2] || ""));
        i += 1;
        for (var k = 0; k < group.width - 1; k++) {  // the rest of a phone number the model wrote
          if (i < tokens.length && INT.test(tokens[i])) i += 1;
        }
        continue;
      }
      out.push(prepared.names.has(token) ? prepared.names.get(token) : token);
      i += 1;
    }
    prepared.names.forEach(function (word, name) { if (tokens.indexOf(name) < 0) lost.push(word); });
    times.forEach(function (g) { lost.push(clock(g, null)[0]); });
    numbers.concat(ordinals).forEach(function (g) { lost.push(g.text); });
    lost = lost.concat(this.keepNames(prepared, out), dropped(prepared, out));
    var stop = prepared.added_stop;
    if (stop && out.length && out[out.length - 1] === stop) out.pop();
    var text = equal(out, tokens) ? output : detokenize(out, this.tgtText);
    if (stop && text.slice(-stop.length) === stop && equal(out, tokens)) {
      text = text.slice(0, -stop.length).replace(RSTRIP, "");
    }
    return { source: prepared.source, text: text, unknown: prepared.unknown.slice(), lost: lost,
             prepared: prepared.text, raw: output, notes: prepared.notes.slice(),
             parts: [[prepared.text, output]], names: Array.from(prepared.names.values()) };
  };

  // Carry._keep_names: a known name the model swapped for another (Paul -> Marc) put back;
  // those still missing are returned.
  Carry.prototype.keepNames = function (prepared, out) {
    var missing = unique(prepared.kept).filter(function (n) { return out.indexOf(n) < 0; });
    if (!missing.length) return [];
    var source = new Set(tokenize(prepared.source, this.srcText)), self = this;
    var carried = Array.from(prepared.names.values()), foreign = [];
    out.forEach(function (t, k) {
      if (self.nameSet.has(t) && !source.has(t) && carried.indexOf(t) < 0) foreign.push(k);
    });
    if (missing.length === 1 && foreign.length === 1) {
      out[foreign[0]] = missing[0];
      return [];
    }
    return missing;
  };

  // Carry._dropped: words the model copies (a name it knows, a word spelt alike in both
  // vocabularies) that the output lacks, in any case ("... visitent Lyon." without Lyon).
  function dropped(prepared, out) {
    var written = new Set(out.map(function (t) { return t.toLowerCase(); }));
    return unique(prepared.copied.filter(function (c) {
      return prepared.kept.indexOf(c[0]) < 0 && !written.has(c[1].toLowerCase());
    }).map(function (c) { return c[0]; }));
  }

  // translate_carried: a line sentence by sentence, each through _translate_pieces, joined.
  // ``decode(text)`` is the model's translation of a prepared sentence: {text, detail}.
  Model.prototype.translateCarried = function (line, decode) {
    var pieces = splitSentences(line), carry = this.carry;
    if (!pieces.length) pieces = [""];
    var done = pieces.map(function (piece) { return carriedPiece(carry, piece, decode); });
    if (done.length === 1) return Object.assign({}, done[0], { source: line });
    function all(key) { return done.reduce(function (a, p) { return a.concat(p[key]); }, []); }
    return { source: line, text: done.map(function (p) { return p.text; }).filter(Boolean).join(" "),
             unknown: all("unknown"), lost: all("lost"),
             prepared: done.map(function (p) { return p.prepared; }).join(" "),
             raw: done.map(function (p) { return p.raw; }).join(" "), notes: all("notes"),
             parts: all("parts"), names: all("names"), details: all("details") };
  };

  // _translate_pieces, for one sentence: when the model drops a placeholder name, the next
  // placeholders are tried (RETRIES more); the first try stands unless a later one keeps all.
  function carriedPiece(carry, sentence, decode) {
    var result = null;
    for (var attempt = 0; attempt <= RETRIES; attempt++) {
      var p = carry.prepare(sentence, attempt), t = decode(p.text);
      var carried = carry.restore(p, t.text), written = tokenize(t.text, carry.tgtText);
      var lost = Array.from(p.names.keys()).some(function (n) { return written.indexOf(n) < 0; });
      if (result === null || !lost) result = Object.assign(carried, { details: [t.detail] });
      if (!lost) break;
    }
    return result;
  }

  // assess: the score (mean log-probability a token; the lowest of the line's sentences) and
  // the warning signs of a translation. Each reason is [id, values]; reasonText words it.
  Model.prototype.assess = function (c) {
    var self = this, means = [], lows = [];
    c.parts.forEach(function (part) {
      var t = self.tokenScores(part[0], part[1]);
      means.push(t.reduce(function (a, b) { return a + b; }, 0) / t.length);
      lows.push(Math.min.apply(null, t));
    });
    var score = Math.min.apply(null, means), low = Math.min.apply(null, lows), reasons = [];
    if (!c.text) reasons.push(["empty", {}]);
    if (score < LOW_SCORE || low < LOW_TOKEN) reasons.push(["unsure", { score: score.toFixed(2), least: low.toFixed(2) }]);
    if (c.unknown.length) reasons.push(["unknown", { words: unique(c.unknown).join(", ") }]);
    if (c.lost.length) reasons.push(["lost", { words: c.lost.join(", ") }]);
    var tokens = c.text ? tokenize(c.text, this.tgtText) : [], source = tokenize(c.source, this.srcText);
    if (tokens.length && equal(tokens, source)) reasons.push(["copies", {}]);
    function words(ts) { return ts.filter(function (t) { return WORD.test(t); }).length; }
    var srcWords = words(source), outWords = words(tokens);
    if (c.text && Math.abs(srcWords - outWords) >= 3 &&
        (outWords > LENGTH_RATIO * srcWords || srcWords > LENGTH_RATIO * outWords)) {
      reasons.push(["length", { out: outWords, src: srcWords }]);
    }
    return { score: score, reasons: reasons, flagged: reasons.length > 0 };
  };

  // The reasons in assess's words (English) or the edition's (REASONS.edition, from the
  // page's catalogue: edition()).
  var REASONS = {
    en: { empty: "the translation is empty",
          unsure: "the model is unsure (log-probability {score} a token, {least} at the least)",
          unknown: "words it read as unknown: {words}", lost: "not carried over: {words}",
          copies: "the output copies the source", length: "{out} words for {src} in the source" }
  };
  function reasonText(reason, lang) { return fmt(REASONS[lang || "en"][reason[0]], reason[1]); }

  function fmt(template, values) {
    return template.replace(/\{(\w+)\}/g, function (_, k) { return values[k]; });
  }

  // labformer translate for one line (what the widget runs): the carried translation, its
  // warnings, and for each sentence what the model did (tokens, attention, the beam).
  Model.prototype.translateLine = function (line, mode, K, alpha) {
    var self = this, started = performance.now();
    if (!strip(line)) throw new RangeError("empty");
    if (!hasWord(line)) throw new RangeError("noword");
    var pieces = splitSentences(line);
    pieces.forEach(function (p) {  // _translate_lines: a sentence longer than the model reads
      if (tokenize(p, self.srcText).length > self.cfg.max_len - 1) throw new RangeError("long");
    });
    var r = this.translateCarried(line, function (text) {
      var d = self.translate(text, mode, K, alpha);
      return { text: d.text, detail: d };
    });
    var verdict = this.assess(r);
    r.score = verdict.score;
    r.flagged = verdict.flagged;
    r.why = verdict.reasons;
    r.reasons = verdict.reasons.map(function (x) { return reasonText(x, "en"); });
    r.ms = performance.now() - started;
    return r;
  };

  // ------------------------------------------------------------------ the widget
  var TEXT = {
    en: {
      intro: "Type a French sentence in the words of the generated corpus. The translator " +
             "trained on this page runs in your browser: nothing is sent anywhere. It " +
             "translates as labformer translate does (chapter 12): sentence by sentence, with " +
             "the numbers, clock times and names it never saw carried over, and the same " +
             "warnings.",
      load: "Load the model and translate", go: "Translate",
      loading: "Loading the model…", ready: "Model loaded: {n} parameters.",
      choose: "Opened as a file, this page cannot read its model file by itself: choose " +
              "{file} below (it is read as data, never run), or serve the folder " +
              "(python -m http.server) and open the page from there.",
      pick: "Model file: ",
      failed: "The model could not be loaded ({why}). The examples below were computed " +
              "by the build.",
      examples: "Precomputed by the build:", example: "Example",
      greedy: "greedy", beam: "beam search", width: "beam width", alpha: "length penalty α",
      output: "Translation: ", unknown: "Not in the vocabulary, read as <unk>: ",
      names: "Not in the model's vocabulary, carried over as written (as a name): ",
      lost: "Not carried over to the translation: ", note: "Note: ",
      nothing: "Translated to nothing: the model has not learned to translate it.",
      flagged: "Likely wrong: ", assessed: "Score: {score} (mean log-probability a token, " +
              "as labformer translate --scores prints it).",
      sentence: "Sentence {n}, as the model read it: ",
      tokens: "Tokens read: ", cross: "Cross-attention of the greedy translation",
      layer: "layer", head: "head", query: "query", key: "key", weight: "weight",
      hyps: "The beam's hypotheses", score: "score", logp: "log-probability",
      unfinished: "(no EOS within the limit)", none: "(empty: EOS came first)", time: "{ms} ms in this browser.",
      empty: "Type a sentence first.", long: "That sentence is longer than the model reads.",
      noword: "That line holds no word: nothing to translate.",
      other: "This model file is not the one these examples were made with: the examples " +
             "and checks above are for the book's model.",
      limits: "What the page does not do: it offers neither --max-length (a sentence longer " +
              "than the model reads is refused) nor --no-carry; its beam search uses the " +
              "length penalty set here, where labformer translate --beam uses none (α = 0 " +
              "gives its output).",
      separator: "; "
    }
  };

  // The edition's words: its catalogue (book/locales/LANG/scripts/labformer-live.json), which
  // the build (book/_ext/labformer_live.py) writes into the page as
  // <script type="application/json" id="lf-words-labformer-live">; none on an English page.
  // Returns "edition" (TEXT.edition and REASONS.edition set, English where it has no word)
  // or "en".
  function edition() {
    var node = document.getElementById("lf-words-labformer-live");
    if (!node) return "en";
    var words = JSON.parse(node.textContent);
    TEXT.edition = Object.assign({}, TEXT.en, words.text);
    REASONS.edition = Object.assign({}, REASONS.en, words.reasons);
    return "edition";
  }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The explorers' colour scale (plotly's Viridis), weights 0 to 1.
  var VIRIDIS = ["#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e",
                 "#26828e", "#21918c", "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b",
                 "#addc30", "#d8e219", "#fde725"];
  function colour(w) {
    var x = Math.max(0, Math.min(1, w)) * (VIRIDIS.length - 1), i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    var f = x - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
    var mix = [1, 3, 5].map(function (o) {
      var u = parseInt(a.substr(o, 2), 16), v = parseInt(b.substr(o, 2), 16);
      return Math.round(u + f * (v - u));
    });
    return "rgb(" + mix.join(",") + ")";
  }

  function grid(words, weights, queries, keys, layer, head) {
    var box = el("figure", "lf-live-grid");
    box.appendChild(el("figcaption", "", words.layer + " " + (layer + 1) + " · " + words.head + " " + (head + 1)));
    var table = el("table"), top = el("tr");
    top.appendChild(el("th"));
    keys.forEach(function (k) { var th = el("th", "lf-live-key"); th.appendChild(el("span", "", k)); top.appendChild(th); });
    table.appendChild(top);
    queries.forEach(function (q, a) {
      var tr = el("tr");
      tr.appendChild(el("th", "lf-live-query", q));
      keys.forEach(function (k, b) {
        var w = weights[a][b], td = el("td");
        td.style.background = colour(w);
        td.title = words.query + ": " + q + "\n" + words.key + ": " + k + "\n" + words.weight + " " + w.toFixed(3);
        td.setAttribute("data-w", String(w));
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    box.appendChild(table);
    return box;
  }

  function legend(words) {
    var box = el("div", "lf-live-legend");
    box.appendChild(el("span", "", words.weight + " 0"));
    var bar = el("span", "lf-live-bar");
    bar.style.background = "linear-gradient(to right," + VIRIDIS.join(",") + ")";
    box.appendChild(bar);
    box.appendChild(el("span", "", "1"));
    return box;
  }

  // What labformer translate writes to standard error for a line (labformer/app/cli/
  // translate.py, _translate_lines), with the score and the reasons of --scores.
  function warnings(out, words, r, lang) {
    var list = el("ul", "lf-live-warnings");
    function add(kind, text) {
      var li = el("li", "lf-live-warning", text);
      li.setAttribute("data-lf-warning", kind);
      list.appendChild(li);
    }
    var unknown = unique(r.unknown).sort();
    if (unknown.length) add("unknown", words.unknown + unknown.join(", "));
    if (r.names.length) add("names", words.names + unique(r.names).join(", "));
    if (r.lost.length) add("lost", words.lost + r.lost.join(", "));
    r.notes.forEach(function (note) {
      var date = /^the date (\S+) is written as in French/.exec(note);
      add("note", words.note + (date && words.date_note ? fmt(words.date_note, { date: date[1] })
                                                        : note));
    });
    if (!r.text) add("nothing", words.nothing);
    if (r.flagged) {
      add("flagged", words.flagged + r.why.map(function (x) { return reasonText(x, lang); })
        .join(words.separator));
    }
    if (list.childNodes.length) out.appendChild(list);
    out.appendChild(el("p", "lf-live-assessed", fmt(words.assessed, { score: r.score.toFixed(4) })));
  }

  // What the model did with one sentence (as it read it): tokens, attention, the beam.
  function detail(out, words, r) {
    out.appendChild(el("p", "lf-live-tokens", words.tokens + r.src_tokens.join(" · ")));
    if (r.cross.length) {
      out.appendChild(el("h4", "", words.cross));
      out.appendChild(legend(words));
      var grids = el("div", "lf-live-grids");
      r.cross.forEach(function (layer, l) {
        layer.forEach(function (w, h) { grids.appendChild(grid(words, w, r.tgt_tokens, r.src_tokens, l, h)); });
      });
      out.appendChild(grids);
    }
    if (r.beam) {
      out.appendChild(el("h4", "", words.hyps + " (" + words.width + " " + r.beam.width + ", α = " + r.beam.alpha + ")"));
      var list = el("ol", "lf-live-beam");
      r.beam.hypotheses.forEach(function (h) {
        var li = el("li");
        li.setAttribute("data-score", String(h.score));
        li.appendChild(el("span", "lf-live-hyp", h.text));
        if (!h.text) li.appendChild(el("span", "lf-live-none", words.none));
        li.appendChild(el("span", "lf-live-score", " " + words.score + " " + h.score.toFixed(3) + ", " +
                          words.logp + " " + h.log_prob.toFixed(3) + (h.finished ? "" : " " + words.unfinished)));
        list.appendChild(li);
      });
      out.appendChild(list);
    }
  }

  // Shows one result in the output area: a precomputed example (the model's own output), or
  // a live one (Model.translateLine: the translation, its warnings, each sentence's detail).
  function show(out, words, r, live, lang) {
    out.textContent = "";
    out.setAttribute("data-lf-source", r.source);
    var line = el("p", "lf-live-output");
    line.appendChild(el("strong", "", words.output));
    var text = r.text !== undefined ? r.text : r.greedy;
    line.appendChild(el("span", "lf-live-text", text));
    if (!text) line.appendChild(el("span", "lf-live-none", words.none));
    out.appendChild(line);
    if (!live) {
      if (r.unknown.length) out.appendChild(el("p", "lf-live-unknown", words.unknown + r.unknown.join(", ")));
      detail(out, words, r);
      return;
    }
    out.appendChild(el("p", "lf-live-time", fmt(words.time, { ms: r.ms.toFixed(0) })));
    warnings(out, words, r, lang);
    r.details.forEach(function (d, k) {
      if (r.details.length > 1) {
        out.appendChild(el("h4", "lf-live-sentence", fmt(words.sentence, { n: k + 1 }) + r.parts[k][0]));
      }
      detail(out, words, d);
    });
  }

  function build(root) {
    if (root.getAttribute("data-lf-state")) return;
    var lang = edition(), words = TEXT[lang];
    var data = root.querySelector("script.lf-live-examples");
    var examples = data ? JSON.parse(data.textContent) : [];
    var fallback = root.querySelector(".lf-live-fallback");
    if (fallback) fallback.remove();
    root.setAttribute("data-lf-state", "examples");

    root.appendChild(el("p", "lf-live-intro", words.intro));
    var form = el("form", "lf-live-form");
    var input = el("input", "lf-live-input");
    input.type = "text";
    input.lang = "fr";
    input.value = examples.length ? examples[0].source : "le chat noir dort.";
    input.setAttribute("aria-label", "French");
    var mode = el("select", "lf-live-mode");
    [["greedy", words.greedy], ["beam", words.beam]].forEach(function (o) {
      var opt = el("option", "", o[1]); opt.value = o[0]; mode.appendChild(opt);
    });
    mode.value = "beam";
    function number(cls, label, value, min, max, step) {
      var wrap = el("label", "lf-live-number");
      wrap.appendChild(el("span", "", label + " "));
      var box = el("input", cls);
      box.type = "number"; box.value = value; box.min = min; box.max = max; box.step = step;
      wrap.appendChild(box);
      return [wrap, box];
    }
    // The settings of the precomputed examples (the chapter's own beam) are the defaults.
    var first = examples.length && examples[0].beam ? examples[0].beam : { width: 4, alpha: 0 };
    var width = number("lf-live-width", words.width, first.width, 1, 8, 1);
    var alpha = number("lf-live-alpha", words.alpha, first.alpha, 0, 2, 0.1);
    var button = el("button", "lf-live-go", words.load);
    button.type = "submit";
    var row = el("div", "lf-live-controls");
    [mode, width[0], alpha[0]].forEach(function (n) { row.appendChild(n); });
    form.appendChild(input);
    form.appendChild(button);
    form.appendChild(row);
    root.appendChild(form);
    var status = el("p", "lf-live-status");
    status.setAttribute("aria-live", "polite");
    root.appendChild(status);
    // Opened as a file (file://): the reader chooses the model file, which is read as data.
    var picker = el("label", "lf-live-pick", words.pick);
    var chooser = el("input", "lf-live-file");
    chooser.type = "file";
    chooser.accept = ".js";
    picker.appendChild(chooser);
    picker.hidden = true;
    root.appendChild(picker);

    var pick = el("div", "lf-live-examples");
    if (examples.length) {
      pick.appendChild(el("span", "", words.examples + " "));
      examples.forEach(function (ex, i) {
        var b = el("button", "lf-live-example", ex.source);
        b.type = "button";
        b.addEventListener("click", function () {
          input.value = ex.source;
          if (model) run(); else show(out, words, ex, false, lang);
        });
        pick.appendChild(b);
        if (i === 0) b.setAttribute("aria-pressed", "true");
      });
      root.appendChild(pick);
    }
    var out = el("div", "lf-live-result");
    root.appendChild(out);
    root.appendChild(el("p", "lf-live-limits", words.limits));
    if (examples.length) show(out, words, examples[0], false, lang);

    var model = null;
    function run() {
      try {
        var K = Math.max(1, Math.min(8, Math.round(Number(width[1].value) || 1)));
        var a = Math.max(0, Math.min(2, Number(alpha[1].value) || 0));
        var r = model.translateLine(input.value, mode.value, K, a);
        show(out, words, r, true, lang);
        root.setAttribute("data-lf-state", "ready");
      } catch (e) {
        status.textContent = e instanceof RangeError ? words[e.message] || String(e) : String(e);
        out.textContent = "";
        // the widget never stays "loading": a failure it cannot recover from is an error
        root.setAttribute("data-lf-state", e instanceof RangeError && words[e.message] ? "ready" : "error");
      }
    }
    var file = root.getAttribute("data-lf-model");
    var expected = { fileSha256: root.getAttribute("data-lf-model-sha256"),
                     weightsSha256: root.getAttribute("data-lf-weights-sha256") };
    function start(picked) {
      root.setAttribute("data-lf-state", "loading");
      status.textContent = words.loading;
      load(file, whenLoaded, expected, picked);
    }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (model) { status.textContent = ""; run(); return; }
      if (root.getAttribute("data-lf-state") === "loading") return;
      if (readable(modelUrl(file))) { start(null); return; }
      root.setAttribute("data-lf-state", "choose");
      status.textContent = fmt(words.choose, { file: modelPath(file) });
      picker.hidden = false;
      chooser.focus();
    });
    chooser.addEventListener("change", function () {
      if (!chooser.files || !chooser.files.length || model) return;
      if (root.getAttribute("data-lf-state") === "loading") return;
      start(chooser.files[0]);
      chooser.value = "";
    });
    function whenLoaded(err, m) {
      if (err) {
        root.setAttribute("data-lf-state", "error");
        status.textContent = fmt(words.failed, { why: err.message });
        return;
      }
      model = m;
      picker.hidden = true;
      button.textContent = words.go;
      status.textContent = fmt(words.ready, { n: m.parameters.toLocaleString() });
      // Another model than the examples' (labformer export of another checkpoint): said
      // once, and the examples (the book's model's outputs) hidden.
      var made = root.getAttribute("data-lf-weights-sha256");
      if (made && m.weightsSha256 !== made) {
        root.setAttribute("data-lf-other-model", "true");
        root.insertBefore(el("p", "lf-live-other", words.other), status);
        pick.hidden = true;
      }
      run();
    }
  }

  // The model file, once per URL, read as data in every mode: its bytes are hashed, its JSON
  // parsed, and nothing in it runs. Where the page can fetch it (http, https) it is fetched;
  // a page opened as a file (file://) can read no other file by itself (and a <script> tag
  // would run the file), so there the reader chooses it (picked: a File from the widget's
  // <input type="file">), and without one it is refused in one sentence. Before the model
  // speaks its data is checked against its data_sha256, and the whole file against the SHA-256
  // the page was built with (expected: { fileSha256, weightsSha256 }, the widget's
  // data-lf-model-sha256 and data-lf-weights-sha256): a file that claims the book's weights but
  // is not the book's file was altered. Each failure is one sentence naming the file and the
  // hash that differs.
  var loaded = {};
  function modelUrl(file) { return new URL(file, SCRIPT || location.href).href; }
  function readable(url) { return /^https?:/.test(url) && !!window.fetch; }
  function modelPath(file) {  // where the file lies on this machine (a file:// page's)
    var url = new URL(modelUrl(file));
    return url.protocol === "file:" ? decodeURIComponent(url.pathname) : url.href;
  }
  function load(file, done, expected, picked) {
    var url = modelUrl(file), key = picked ? null : url;
    if (key && loaded[key]) { loaded[key].push(done); return; }
    var waiting = [done];
    if (key) loaded[key] = waiting;
    function finish(err, m) {
      waiting.forEach(function (f) { f(err, m); });
      if (key) loaded[key] = err ? null : { push: function (f) { f(null, m); } };
    }
    var bytes;
    if (picked) {
      file = picked.name || file;
      bytes = picked.arrayBuffer();
    } else if (readable(url)) {
      bytes = fetch(url).then(function (response) {
        if (!response.ok) throw new Error(file + " did not load (HTTP " + response.status + ")");
        return response.arrayBuffer();
      });
    } else {
      finish(new Error(file + " is not read by a page opened as a file (file://), where loading " +
                       "it would run it: serve the folder (python -m http.server) and open the " +
                       "page from there, or choose the file with the page's file button"));
      return;
    }
    bytes.then(function (buffer) {
      return sha256(buffer).then(function (hash) {
        var payload = parseModelFile(file, new TextDecoder().decode(buffer));
        return verifyModelFile(file, payload, hash, expected || {}).then(function () {
          return new Model(payload);
        });
      });
    }).then(function (m) { finish(null, m); }, function (e) {
      finish(e instanceof Error ? e : new Error(String(e)));
    });
  }

  // labformer.app.export.read_model_file: the payload of a model file, parsed, never run.
  function parseModelFile(file, text) {
    var head = "window." + GLOBAL + " = ", start = text.indexOf(head);
    if (text.indexOf("/* labformer:") !== 0 || start < 0) {
      throw new Error(file + " is not a labformer model file (no " + GLOBAL + " in it)");
    }
    try {
      return JSON.parse(text.slice(start + head.length).replace(/;\s*$/, ""));
    } catch (e) {
      throw new Error(file + " is not a model file as labformer export writes it (its data " +
                      "does not parse, or something follows it): export it again");
    }
  }

  function sha256(buffer) {  // hex SHA-256 (null where the browser offers no hashing)
    if (!window.crypto || !window.crypto.subtle) return Promise.resolve(null);
    return window.crypto.subtle.digest("SHA-256", buffer).then(function (digest) {
      return Array.from(new Uint8Array(digest)).map(function (b) {
        return ("0" + b.toString(16)).slice(-2);
      }).join("");
    });
  }

  function verifyModelFile(file, payload, fileHash, expected) {
    if (!payload || typeof payload !== "object" || typeof payload.data !== "string") {
      return Promise.reject(new Error(file + " holds no labformer model"));
    }
    var bytes;
    try {
      var raw = atob(payload.data);
      bytes = new Uint8Array(raw.length);
      for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    } catch (e) {
      return Promise.reject(new Error(file + " is damaged: its data is not base64"));
    }
    return sha256(bytes.buffer).then(function (hash) {
      if (hash !== null && payload.data_sha256 && hash !== payload.data_sha256) {
        throw new Error(file + " is damaged: its weights' SHA-256 is " + hash.slice(0, 12) +
                        "…, its data_sha256 says " + String(payload.data_sha256).slice(0, 12) +
                        "…: export it again");
      }
      if (fileHash && expected.fileSha256 && fileHash !== expected.fileSha256 &&
          (!expected.weightsSha256 || payload.weights_sha256 === expected.weightsSha256)) {
        throw new Error(file + " is not the file this page was built with: its SHA-256 is " +
                        fileHash.slice(0, 12) + "…, the page's data-lf-model-sha256 says " +
                        expected.fileSha256.slice(0, 12) + "… (its weights_sha256 claims the " +
                        "same model, so its vocabularies or settings were altered): export it " +
                        "again");
      }
      var problem = tensorProblem(payload, bytes);
      if (problem) throw new Error(file + " is damaged: " + problem + "; export it again");
    });
  }

  // What is wrong with a payload's tensors (a shape or offset past its data, a weight that is
  // not a number), in words; null when nothing is.
  function tensorProblem(payload, bytes) {
    var size = payload.dtype === "float16" ? 2 : 4, total = Math.floor(bytes.length / size);
    var view = new DataView(bytes.buffer), tensors = payload.tensors;
    if (!Array.isArray(tensors)) return "it lists no tensors";
    for (var t = 0; t < tensors.length; t++) {
      var entry = tensors[t], name = entry && entry[0], shape = entry && entry[1];
      var offset = entry && entry[2];
      if (!Array.isArray(shape) || !shape.every(function (d) { return Number.isInteger(d) && d > 0; }) ||
          !Number.isInteger(offset) || offset < 0) {
        return "the shape or offset of its tensor " + name + " is not whole numbers";
      }
      var n = shape.reduce(function (a, b) { return a * b; }, 1);
      if (offset + n > total) {
        return "its tensor " + name + " of shape [" + shape.join(", ") + "] runs past the end " +
               "of its data";
      }
      for (var j = offset; j < offset + n; j++) {
        var finite = size === 4 ? isFinite(view.getFloat32(4 * j, true))
                                : (view.getUint16(2 * j, true) & 0x7c00) !== 0x7c00;
        if (!finite) return "its tensor " + name + " holds a weight that is not a number (NaN or infinite)";
      }
    }
    return null;
  }

  window.labformerLive = { tokenize: tokenize, detokenize: detokenize, Model: Model, load: load,
                           Carry: Carry, splitSentences: splitSentences, reasonText: reasonText };

  function init() { document.querySelectorAll(".lf-live").forEach(build); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
