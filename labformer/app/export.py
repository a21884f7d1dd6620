"""The translator in a web page: its weights, vocabularies and tokeniser rules as one .js file.

The book's live translator (``book/_static/labformer-live.js``) runs labformer's forward pass in
the reader's browser. It loads its model from the file written here, as data: the page never
runs it (no ``<script>`` tag), in any mode. From a static server (http, https) the page fetches
it; a page opened as a file (``file://``), where a browser lets a page read no other file by
itself, asks the reader to choose it (or to serve the folder, ``python -m http.server``), and
refuses to load it otherwise. Either way it reads the file's bytes, hashes them and parses the
JSON after its header, so a line of code appended to the file is a parse error, not a
program. The file holds::

    window.LABFORMER_LIVE_MODEL = {format, config, src_vocab, tgt_vocab, src_text, tgt_text,
                                   carry, moses, dtype, tensors: [[name, shape, offset], ...],
                                   weights_sha256, data_sha256, data}

``data`` is every tensor of the model's state dict, little-endian float32 (exact: the page
computes what PyTorch computes) or float16 (half the size, each weight rounded), one after
the other, in base64; ``offset`` counts elements. ``weights_sha256`` identifies the model
(:func:`labformer.train.weights_sha256` of its state dict, as its checkpoint stores it) and
``data_sha256`` is the SHA-256 of the bytes ``data`` decodes to: :func:`read_model_file` checks
it, and so does the page before its model speaks (where the browser hashes); the page also
refuses a file that claims the book's weights but whose SHA-256, the whole file's, is not the one
it was built with (:func:`live_widget_html` records it). The ``window.LABFORMER_LIVE_MODEL =``
header is the file's layout, read by text, not a way to load it. An export from a checkpoint
checks the checkpoint's own checksums first.
``config`` is the model's :class:`~labformer.transformer.TransformerConfig`, ``src_text`` /
``tgt_text`` the :class:`~labformer.data.TextCodec` settings the page tokenises with.

The page translates as ``labformer translate`` does (:mod:`labformer.app.carry`: sentences split,
numbers, clock times and names carried over, the same warnings). ``carry`` is what
:class:`~labformer.app.carry.Carry` reads off the vocabularies
(:meth:`~labformer.app.carry.Carry.tables`),
and ``moses`` holds, for each language a Moses codec tokenises, what sacremoses's tokenizer and
detokenizer read from their data files (:func:`moses_tables`); ``{}`` when both codecs are
``"words"``. Format 1 files (before these two) are refused: export them again.

:func:`export_checkpoint` writes the file from a checkpoint on disk (``labformer export``);
:func:`export_model` from a model in memory (the book). :func:`live_examples` and
:func:`live_widget_html` make what the page shows before the model has loaded.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from labformer.app.carry import Carry
from labformer.book.record import record_attention
from labformer.data import TextCodec, Vocab
from labformer.decoding import beam_search, greedy_decode
from labformer.train import weights_sha256
from labformer.transformer import Transformer

__all__ = [
    "DTYPES",
    "FORMAT",
    "GLOBAL",
    "MODEL_FILE",
    "export_checkpoint",
    "export_model",
    "live_examples",
    "live_widget_html",
    "model_payload",
    "moses_tables",
    "model_script",
    "read_model_file",
]

FORMAT = 2  # the payload's layout; the page refuses another (2: carry and moses added)
GLOBAL = "LABFORMER_LIVE_MODEL"  # the name in the file's header (read as text, never run)
MODEL_FILE = "labformer-live-model.js"  # the file's name, the one the page asks for
DTYPES = {"float32": torch.float32, "float16": torch.float16}


def model_payload(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, *,
                  src_text: TextCodec | None = None, tgt_text: TextCodec | None = None,
                  dtype: str = "float32") -> dict[str, Any]:
    """Everything the page needs to run ``model``, as JSON-able data (see the module doc).

    ``src_text`` / ``tgt_text``: the codecs the model was trained with (default: the
    generated corpus's lower-case word tokenizer, as :class:`~labformer.app.translate.Translator`).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    cfg = model.config
    if cfg.src_vocab_size != len(src_vocab) or cfg.tgt_vocab_size != len(tgt_vocab):
        raise ValueError(f"vocabulary sizes {len(src_vocab)}, {len(tgt_vocab)} do not match "
                         f"the model's {cfg.src_vocab_size}, {cfg.tgt_vocab_size}")
    tensors: list[list[Any]] = []
    chunks: list[bytes] = []
    offset = 0
    for name, tensor in model.state_dict().items():
        if not tensor.is_floating_point():
            raise ValueError(f"state dict entry {name} is {tensor.dtype}, not a float tensor")
        flat = tensor.detach().to("cpu", DTYPES[dtype]).contiguous().view(-1)
        # little-endian bytes, whatever the machine (numpy's '<' order)
        array = flat.numpy().astype(f"<f{flat.element_size()}", copy=False)
        chunks.append(array.tobytes())
        tensors.append([name, list(tensor.shape), offset])
        offset += flat.numel()
    src_text = src_text or TextCodec("fr", "words")
    tgt_text = tgt_text or TextCodec("en", "words")
    data = b"".join(chunks)
    moses_langs = [c.lang for c in (src_text, tgt_text) if c.kind == "moses"]
    return {
        "format": FORMAT,
        "config": dataclasses.asdict(cfg),
        "src_vocab": list(src_vocab.itos),
        "tgt_vocab": list(tgt_vocab.itos),
        "src_text": src_text.to_dict(),
        "tgt_text": tgt_text.to_dict(),
        "carry": Carry(src_vocab, tgt_vocab, src_text, tgt_text).tables(),
        "moses": moses_tables(moses_langs),
        "dtype": dtype,
        "parameters": model.num_parameters(),
        "tensors": tensors,
        "weights_sha256": weights_sha256(model.state_dict()),
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "data": base64.b64encode(data).decode("ascii"),
    }


def _ranges(chars: str) -> list[int]:
    """The code points of ``chars`` as a flat list of inclusive ranges [start, end, ...]."""
    flat: list[int] = []
    for point in sorted(set(map(ord, chars))):
        if flat and flat[-1] == point - 1:
            flat[-1] = point
        else:
            flat += [point, point]
    return flat


def moses_tables(langs: Sequence[str]) -> dict[str, Any]:
    """What sacremoses's MosesTokenizer and MosesDetokenizer read from their data files, for
    each of ``langs``: the non-breaking prefixes ("M", "Dr", "p.m" ...: a full stop after them
    is not split off) and the character classes of its rules (Perl's IsAlnum, IsAlpha, IsN,
    IsLower; the detokenizer's IsAlpha and IsSc) as code-point ranges. The page's Moses
    tokenizer is sacremoses's, rule by rule, with these tables; ``{}`` for no language."""
    if not langs:
        return {}
    from sacremoses import MosesDetokenizer, MosesTokenizer

    out: dict[str, Any] = {}
    for lang in dict.fromkeys(langs):
        tok, detok = MosesTokenizer(lang=lang), MosesDetokenizer(lang=lang)
        out[lang] = {"prefixes": list(tok.NONBREAKING_PREFIXES),
                     "numeric_only": list(tok.NUMERIC_ONLY_PREFIXES),
                     "alnum": _ranges(tok.IsAlnum), "alpha": _ranges(tok.IsAlpha),
                     "n": _ranges(tok.IsN), "lower": _ranges(tok.IsLower),
                     "detok_alpha": _ranges(detok.IsAlpha), "sc": _ranges(detok.IsSc)}
    return out


def model_script(payload: dict[str, Any]) -> str:
    """The file's text: a header comment, ``window.LABFORMER_LIVE_MODEL = `` and the payload as
    JSON (the page reads it as text and parses the JSON; it never runs the file)."""
    body = json.dumps(payload, ensure_ascii=True, separators=(",", ":"))
    return (f"/* labformer: a translator's weights for the live page (format {FORMAT}); "
            f"written by labformer.app.export */\nwindow.{GLOBAL} = {body};\n")


def export_model(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, out_dir: Path, *,
                 src_text: TextCodec | None = None, tgt_text: TextCodec | None = None,
                 dtype: str = "float32", name: str = MODEL_FILE) -> list[Path]:
    """Write ``out_dir/name`` (the model file the page loads); return the paths written.

    The file is written whole under a temporary name, then renamed: a reader (or a build)
    never sees half a file, and an error leaves an earlier file as it was.
    """
    if not name.endswith(".js") or "/" in name or os.sep in name:
        raise ValueError(f"name must be a plain file name ending in .js, got {name!r}")
    text = model_script(model_payload(model, src_vocab, tgt_vocab, src_text=src_text,
                                      tgt_text=tgt_text, dtype=dtype))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="ascii")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return [path]


def export_checkpoint(checkpoint: Path, out_dir: Path, *, dtype: str = "float32",
                      name: str = MODEL_FILE) -> list[Path]:
    """Write the page's model file from a translator checkpoint (``labformer train``'s, or
    the chapters'); return the paths written. Any device's checkpoint: it is read on the CPU."""
    from labformer.app.translate import (
        Translator,  # (translate imports training; only this needs it)
    )

    translator = Translator.from_checkpoint(checkpoint, device="cpu")
    return export_model(translator.model, translator.src_vocab, translator.tgt_vocab,
                        Path(out_dir), src_text=translator.src_text,
                        tgt_text=translator.tgt_text, dtype=dtype, name=name)


def read_model_file(path: Path) -> dict[str, Any]:
    """The payload of a model file written by :func:`export_model`, its data checked against
    its ``data_sha256``; ValueError, in one line naming the file, for anything else (another
    file, a damaged one). A file exported before the checksums existed reads unchecked."""
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a labformer model file (not ASCII text)") from None
    head = f"window.{GLOBAL} = "
    start = text.find(head)
    if not text.startswith("/* labformer:") or start < 0:
        raise ValueError(f"{path} is not a labformer model file (no {GLOBAL} in it)")
    try:
        payload = json.loads(text[start + len(head):].rstrip().removesuffix(";"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is a damaged labformer model file (its JSON breaks at "
                         f"character {e.pos})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else None
        raise ValueError(f"{path} is a labformer model file of another format (format {found}; "
                         f"this version reads format {FORMAT}): export it again with "
                         f"labformer export")
    if "data_sha256" in payload:
        try:
            data = base64.b64decode(payload.get("data", ""), validate=True)
        except ValueError:
            data = b""
        if hashlib.sha256(data).hexdigest() != payload["data_sha256"]:
            raise ValueError(f"{path} is damaged: its weights do not match the checksum "
                             f"stored with them; export it again")
    return payload


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file: the page records its model file's, the build checks it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@torch.no_grad()
def live_examples(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab,
                  sentences: Sequence[str], *, src_text: TextCodec | None = None,
                  tgt_text: TextCodec | None = None, beam: int = 4,
                  length_penalty: float = 0.0) -> list[dict[str, Any]]:
    """What the page shows before its model loads (or where it cannot run): for each
    sentence, its tokens, the greedy translation, the cross-attention of every decoder layer
    and head on that translation, and the beam's hypotheses with their scores, computed in
    PyTorch exactly as the page computes them in the browser."""
    src_text = src_text or TextCodec("fr", "words")
    tgt_text = tgt_text or TextCodec("en", "words")
    model.eval()
    cfg = model.config
    out = []
    for sentence in sentences:
        tokens = src_text.tokenize(sentence)
        if not tokens or len(tokens) > cfg.max_len - 1:
            raise ValueError(f"example {sentence!r} has {len(tokens)} tokens; the model reads "
                             f"1 to {cfg.max_len - 1}")
        ids = src_vocab.encode(tokens)  # ends with EOS
        src = torch.tensor([ids])
        limit = min(cfg.max_len, 2 * len(ids) + 10)  # as Translator.translate_detailed
        greedy = greedy_decode(model, src, max_len=limit)[0].tolist()
        out_ids = [t for t in greedy if t != cfg.pad_id]
        tgt_in = torch.tensor([[cfg.bos_id, *out_ids[:-1]]]) if out_ids else None
        cross: list[list[list[list[float]]]] = []
        if tgt_in is not None:
            with record_attention(model) as maps:
                model(src, tgt_in)
            cross = [maps[f"decoder.layers.{i}.cross_attn"][0].tolist()
                     for i in range(cfg.num_decoder_layers)]  # (N, h, T, S)
        hyps = beam_search(model, src, beam_size=beam, top_beams=beam, max_len=limit,
                           length_penalty=length_penalty)[0]
        out.append({
            "source": sentence,
            "src_tokens": [*(t if t in src_vocab else Vocab.unk for t in tokens), Vocab.eos],
            "unknown": src_vocab.lookup_unknown(tokens),
            "greedy": tgt_text.detokenize(tgt_vocab.decode(out_ids)),
            "tgt_tokens": [tgt_vocab.id_to_token(t) for t in out_ids],
            "cross": [[[[round(w, 4) for w in row] for row in head] for head in layer]
                      for layer in cross],
            "beam": {"width": beam, "alpha": length_penalty,
                     "hypotheses": [{"text": tgt_text.detokenize(tgt_vocab.decode(h.tokens)),
                                     "score": round(h.score, 4),
                                     "log_prob": round(h.log_prob, 4),
                                     "finished": h.finished} for h in hyps]},
        })
    return out


def live_widget_html(model_file: Path, examples: Sequence[dict[str, Any]]) -> str:
    """The page's container for the live translator: the model file's name and SHA-256 (the
    build copies that file next to the page's scripts and checks it), the SHA-256 of the
    weights the examples were computed with (``weights_sha256`` of the file), and the
    precomputed examples as JSON. ``book/_static/labformer-live.js`` builds the widget inside it."""
    model_file = Path(model_file)
    data = json.dumps(list(examples), ensure_ascii=False, separators=(",", ":"))
    data = data.replace("</", "<\\/")  # nothing in the JSON can close the <script> element
    # The weights the examples were computed with: a page that loads a model file of other
    # weights (another export) can tell that its precomputed examples are not that model's.
    try:
        weights = read_model_file(model_file).get("weights_sha256")
    except ValueError:  # not an exported model file (a test's stand-in): nothing to compare
        weights = None
    made_with = f' data-lf-weights-sha256="{weights}"' if weights else ""
    return (f'<div class="lf-live" data-lf-model="{html.escape(model_file.name)}" '
            f'data-lf-model-sha256="{file_sha256(model_file)}"{made_with}>'
            f'<script type="application/json" class="lf-live-examples">{data}</script>'
            '<p class="lf-live-fallback">The live translator needs JavaScript.</p></div>')
