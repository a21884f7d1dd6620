/* labformer: the live translator. The book's own trained Transformer, run in the reader's
   browser, offline: this file is labformer's forward pass written out in plain JavaScript, to
   be read beside the chapters (each piece names its chapter), and the widget around it.

   The page holds a <div class="lf-live" data-lf-model="FILE"> with precomputed examples (JSON,
   made by the build with labformer.export.live_examples). They are shown at once. The model
   itself (FILE, written by labformer.export, a few MB) is loaded only when the reader presses
   the button: a <script> tag next to this file, so it loads from any static server and from
   files opened directly (file://); nothing is fetched from the network.

   Numbers are labformer's: the test tests/test_live.py runs this file in Chromium against
   PyTorch on the same checkpoint (logits, attention weights, greedy and beam outputs,
   tokenisation). window.labformerLive exposes the pieces it calls. */
(function () {
  "use strict";

  var GLOBAL = "LABFORMER_LIVE_MODEL";  // labformer.export.GLOBAL
  var FORMAT = 1;  // labformer.export.FORMAT
  var SCRIPT = document.currentScript ? document.currentScript.src : "";

  // ------------------------------------------------------------------ text (chapter 11)
  // labformer/data/text.py and moses.py: NFC, typographic apostrophes read as ', white space
  // stripped, lower case, then words (hyphens inside), elided words with their apostrophe
  // ("l'", "j'") and each other symbol a token. Python's \w is a letter, a digit (any
  // script) or _, and its white space is str.isspace's: both written out here.
  var W = "\\p{L}\\p{N}_";
  var SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a" +
              "\\u2028\\u2029\\u202f\\u205f\\u3000";
  var WORDS_TOKEN = new RegExp("[" + W + "]+'|[" + W + "]+(?:-[" + W + "]+)*|[^" + W + SPACE +
                               "]", "gu");
  var STRIP = new RegExp("^[" + SPACE + "]+|[" + SPACE + "]+$", "gu");
  var PUNCTUATION = { ".": 1, ",": 1, ";": 1, ":": 1, "!": 1, "?": 1 };

  function normalize(text, codec) {
    text = text.normalize("NFC").replace(/[\u2019\u02bc]/g, "'").replace(STRIP, "");
    return codec.kind === "words" || codec.lowercase ? text.toLowerCase() : text;
  }

  // The "words" codec exactly. A "moses" codec (a model of one's own pairs, chapter 12) is
  // only approximated: the same splitting, and English "'s" apart. The widget says so.
  // Moses, approximately: clock times and decimal numbers stay whole; English "don't" is
  // "don" + "'t" (French "l'homme" is "l'" + "homme" in both).
  var MOSES_TOKEN = new RegExp("\\d{1,2}:\\d{2}(?!\\d)|\\d+(?:[.,]\\d+)+|" +
                               WORDS_TOKEN.source, "gu");
  function tokenize(text, codec) {
    if (codec.kind !== "moses") return normalize(text, codec).match(WORDS_TOKEN) || [];
    var tokens = normalize(text, codec).match(MOSES_TOKEN) || [];
    if (codec.lang !== "en") return tokens;
    var out = [];
    tokens.forEach(function (t, i) {
      var prev = out.length ? out[out.length - 1] : "";
      if (/^[^']+'$/.test(prev) && /^[\p{L}]+$/u.test(t) && i > 0) {
        out[out.length - 1] = prev.slice(0, -1);
        out.push("'" + t);
      } else {
        out.push(t);
      }
    });
    return out;
  }

  function detokenize(tokens, codec) {
    var out = "", moses = codec && codec.kind === "moses";
    tokens.forEach(function (t, i) {
      var glue = i === 0 || PUNCTUATION[t] || /'$/.test(tokens[i - 1]) || (moses && /^'/.test(t));
      out += (glue ? "" : " ") + t;
    });
    return out;
  }

  // ------------------------------------------------------------------ weights
  // labformer.export: every tensor of the state dict, one after the other, little-endian
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
                      "reads format " + FORMAT + ": export it again with labformer.export");
    }
    var t = readTensors(payload);
    this.cfg = payload.config;
    this.srcVocab = payload.src_vocab;
    this.tgtVocab = payload.tgt_vocab;
    this.srcText = payload.src_text;
    this.tgtText = payload.tgt_text;
    this.parameters = payload.parameters;
    this.srcIndex = {};
    for (var i = 0; i < this.srcVocab.length; i++) this.srcIndex[this.srcVocab[i]] = i;
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

  // ------------------------------------------------------------------ the widget
  var TEXT = {
    en: {
      intro: "Type a French sentence in the words of the generated corpus. The translator " +
             "trained on this page runs in your browser: nothing is sent anywhere.",
      load: "Load the model and translate", go: "Translate",
      loading: "Loading the model…", ready: "Model loaded: {n} parameters.",
      failed: "The model could not be loaded ({why}). The examples below were computed " +
              "by the build.",
      examples: "Precomputed by the build:", example: "Example",
      greedy: "greedy", beam: "beam search", width: "beam width", alpha: "length penalty α",
      output: "Translation: ", unknown: "Words the model never saw (read as <unk>): ",
      tokens: "Tokens read: ", cross: "Cross-attention of the greedy translation",
      layer: "layer", head: "head", query: "query", key: "key", weight: "weight",
      hyps: "The beam's hypotheses", score: "score", logp: "log-probability",
      unfinished: "(no EOS within the limit)", none: "(empty: EOS came first)", time: "{ms} ms in this browser.",
      empty: "Type a sentence first.", long: "That sentence is longer than the model reads.",
      limits: "What the page does not do: it reads only the lower-case words of the " +
              "generated corpus (capitals, typographic apostrophes and accents in any " +
              "Unicode form are read as the Python translator reads them); it does not " +
              "carry numbers or names the model never saw through to the output, as the " +
              "command line does (chapter 12); a model of one's own pairs is tokenised " +
              "only approximately.",
      moses: "This model was trained with the Moses tokenizer, which the page only " +
             "approximates: some sentences are split differently than in Python."
    },
    zh: {
      intro: "输入一句由生成语料中的词组成的法语句子。本页训练的翻译器就在你的浏览器里运行，" +
             "不向任何地方发送数据。",
      load: "加载模型并翻译", go: "翻译",
      loading: "正在加载模型……", ready: "模型已加载：{n} 个参数。",
      failed: "模型未能加载（{why}）。下面的例子是构建时预先算好的。",
      examples: "构建时预先算好的例子：", example: "例子",
      greedy: "贪心解码", beam: "束搜索", width: "束宽", alpha: "长度惩罚 α",
      output: "译文：", unknown: "模型没见过的词（读作 <unk>）：",
      tokens: "读入的词元：", cross: "贪心译文的交叉注意力",
      layer: "层", head: "头", query: "查询", key: "键", weight: "权重",
      hyps: "束中的假设", score: "得分", logp: "对数概率",
      unfinished: "（在长度上限内没有 EOS）", none: "（空：第一个词元就是 EOS）", time: "在本浏览器中用时 {ms} 毫秒。",
      empty: "请先输入一句话。", long: "这句话超出了模型能读的长度。",
      limits: "本页不做的事：它只读生成语料中的小写词（大写字母、弯撇号以及任何 Unicode " +
              "形式的重音字母，都按 Python 翻译器的方式读入）；它不会像命令行那样把模型没见过" +
              "的数字和名字搬到译文里（第 12 章）；用自己的句对训练的模型，分词只是近似。",
      moses: "这个模型用 Moses 分词器训练，本页只能近似它：有些句子的切分会与 Python 不同。"
    }
  };

  function edition() {
    var lang = (document.documentElement.getAttribute("lang") || "").toLowerCase();
    return lang.indexOf("zh") === 0 || /\/zh\//.test(location.pathname) ? "zh" : "en";
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

  function fmt(template, values) {
    return template.replace(/\{(\w+)\}/g, function (_, k) { return values[k]; });
  }

  // Shows one result (precomputed or live) in the output area.
  function show(out, words, r, live) {
    out.textContent = "";
    out.setAttribute("data-lf-source", r.source);
    var line = el("p", "lf-live-output");
    line.appendChild(el("strong", "", words.output));
    var text = r.text !== undefined ? r.text : r.greedy;
    line.appendChild(el("span", "lf-live-text", text));
    if (!text) line.appendChild(el("span", "lf-live-none", words.none));
    out.appendChild(line);
    if (live) out.appendChild(el("p", "lf-live-time", fmt(words.time, { ms: r.ms.toFixed(0) })));
    if (r.unknown.length) out.appendChild(el("p", "lf-live-unknown", words.unknown + r.unknown.join(", ")));
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

  function build(root) {
    if (root.getAttribute("data-lf-state")) return;
    var words = TEXT[edition()];
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

    var pick = el("div", "lf-live-examples");
    if (examples.length) {
      pick.appendChild(el("span", "", words.examples + " "));
      examples.forEach(function (ex, i) {
        var b = el("button", "lf-live-example", ex.source);
        b.type = "button";
        b.addEventListener("click", function () {
          input.value = ex.source;
          if (model) run(); else show(out, words, ex, false);
        });
        pick.appendChild(b);
        if (i === 0) b.setAttribute("aria-pressed", "true");
      });
      root.appendChild(pick);
    }
    var out = el("div", "lf-live-result");
    root.appendChild(out);
    root.appendChild(el("p", "lf-live-limits", words.limits));
    if (examples.length) show(out, words, examples[0], false);

    var model = null;
    function run() {
      try {
        var K = Math.max(1, Math.min(8, Math.round(Number(width[1].value) || 1)));
        var a = Math.max(0, Math.min(2, Number(alpha[1].value) || 0));
        var r = model.translate(input.value, mode.value, K, a);
        show(out, words, r, true);
        root.setAttribute("data-lf-state", "ready");
      } catch (e) {
        status.textContent = e instanceof RangeError ? words[e.message] || String(e) : String(e);
        out.textContent = "";
      }
    }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (model) { status.textContent = ""; run(); return; }
      if (root.getAttribute("data-lf-state") === "loading") return;
      root.setAttribute("data-lf-state", "loading");
      status.textContent = words.loading;
      load(root.getAttribute("data-lf-model"), function (err, m) {
        if (err) {
          root.setAttribute("data-lf-state", "error");
          status.textContent = fmt(words.failed, { why: err.message });
          return;
        }
        model = m;
        button.textContent = words.go;
        status.textContent = fmt(words.ready, { n: m.parameters.toLocaleString() }) +
          (m.srcText.kind === "moses" ? " " + words.moses : "");
        run();
      });
    });
  }

  // The model file, by a <script> tag beside this one (works under file:// too); once.
  var loaded = {};
  function load(file, done) {
    var url = new URL(file, SCRIPT || location.href).href;
    if (loaded[url]) { loaded[url].push(done); return; }
    loaded[url] = [done];
    function finish(err, m) {
      loaded[url].forEach(function (f) { f(err, m); });
      loaded[url] = err ? null : { push: function (f) { f(null, m); } };
    }
    var tag = document.createElement("script");
    tag.src = url;
    tag.onload = function () {
      try {
        var m = new Model(window[GLOBAL]);
        finish(null, m);
      } catch (e) { finish(e); }
    };
    tag.onerror = function () { finish(new Error(file + " did not load")); };
    document.head.appendChild(tag);
  }

  window.labformerLive = { tokenize: tokenize, detokenize: detokenize, Model: Model, load: load };

  function init() { document.querySelectorAll(".lf-live").forEach(build); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
