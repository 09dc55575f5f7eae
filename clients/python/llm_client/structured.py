"""Structured output in the generation loop (client.py), as the C++ loop runs it
(client/generate/generate_loop.cc; docs/structured_output.md, "How a
constrained generation runs"):

- every request whose logits are drawn from carries the matcher's allowed
  tokens (llm.v1.TokenMask, in the cheapest of its encodings), which the model
  service applies before it encodes the logits: the draw is exact from the
  restricted distribution, and a drawn token the grammar refuses means the
  server ignored the mask (an error, never unconstrained output);
- the tokens the grammar forces are fed without a draw: at the start with the
  prompt's Prefill, and after a drawn token in the same decode step, as
  proposals sure to be kept (rows not drawn from carry a mask allowing all);
- speculation's proposals are walked through the matcher, cut at the first
  it refuses, each kept one's row masked with the grammar after it, then
  rolled back: the matcher takes a proposal only when the draw accepts it.

Threads: a Grammar belongs to one generation. Cost: a mask is computed and
encoded in C++ (microseconds) plus a ctypes call and, for a list encoding, a
Python list of its ids.
"""

from __future__ import annotations

from typing import Sequence

from .constrain import Compiler, Constraint
from .errors import LlmError, Unsupported
from .pb import model_pb2

# A row left unconstrained (a forced token's, not drawn from): every token.
ALLOW_ALL = model_pb2.TokenMask(disallowed=model_pb2.TokenIds())


def compiler_for(tokenizer_info, model_info, token_bytes: Sequence[bytes],
                 library=None) -> Compiler:
    """The compiler of the model's vocabulary, made as the C++ client makes it
    (Services::CompileConstraint), so that both send the same masks: each
    token's bytes (the tokenizer's Decode pieces), the end tokens (EOS, EOT)
    allowed only where the output is complete, the other control tokens
    never, and as many mask bits as the model has logits."""
    if len(token_bytes) != tokenizer_info.vocab_size:
        raise Unsupported("structured output needs each token's bytes, and the tokenizer "
                          "service does not return them (DecodeRequest.pieces: an older "
                          "tokenizer_server)")
    end_ids = [getattr(tokenizer_info, f) for f in ("eos_id", "eot_id")
               if tokenizer_info.HasField(f)]
    end_ids = list(dict.fromkeys(end_ids))
    # Control tokens (<|im_start|>, ...) never; user-defined ones (Qwen's
    # <tool_call>) keep their text, as in Services::CompileConstraint.
    special_ids = [s.id for s in tokenizer_info.special_tokens
                   if s.kind == "control" and s.id not in end_ids]
    return Compiler(token_bytes, end_ids=end_ids, special_ids=special_ids,
                    vocab_size=max(model_info.vocab_size, tokenizer_info.vocab_size),
                    library=library)


class Grammar:
    """A constraint's state in one generation: the tokens accepted so far
    (drawn, and forced ones fed or about to be)."""

    def __init__(self, constraint: Constraint, vocab_size: int):
        if constraint.vocab_size != vocab_size:
            raise LlmError(f"the constraint was compiled for a vocabulary of "
                           f"{constraint.vocab_size} tokens, the model has {vocab_size}")
        self._matcher = constraint.matcher()

    def mask(self) -> model_pb2.TokenMask:
        """The tokens allowed next, as the request's `mask`."""
        encoding, data = self._matcher.wire_mask()
        if encoding == "bitset":
            return model_pb2.TokenMask(bitset=data)
        return model_pb2.TokenMask(**{encoding: model_pb2.TokenIds(ids=data)})

    def accept(self, token: int) -> None:
        """A drawn or forced token joins the output. A token the grammar
        refuses (FAILED_PRECONDITION) means the model service did not apply
        the mask."""
        if not self._matcher.accept(token):
            raise LlmError(f"the model service returned logits that allow token {token}, which "
                           f"the constraint does not (did it apply the token mask?)",
                           code="FAILED_PRECONDITION")

    def forced(self, room: int) -> list[int]:
        """The tokens the grammar forces now, at most `room`, accepted."""
        if room <= 0 or self._matcher.is_terminated():
            return []
        tokens = self._matcher.forced_tokens(room)
        for t in tokens:
            self.accept(t)
        return tokens

    def mask_step(self, request, forced: bool) -> list[int]:
        """Sets the masks of a DecodeTokenRequest whose `proposed` follow its
        token: forced tokens (already accepted; only the last row is drawn
        from) or speculative ones (cut at the first the grammar refuses, and
        at an end token). Returns the proposals kept (set in the request)."""
        proposed = list(request.proposed)
        if forced:
            request.mask.CopyFrom(ALLOW_ALL)
            masks = [ALLOW_ALL] * (len(proposed) - 1) + [self.mask()]
        else:
            request.mask.CopyFrom(self.mask())
            masks = []
            m = self._matcher
            while len(masks) < len(proposed) and m.accept(proposed[len(masks)]):
                if m.is_terminated():  # an end token: nothing follows it
                    m.rollback(1)
                    break
                masks.append(self.mask())
            if masks:
                m.rollback(len(masks))
            proposed = proposed[:len(masks)]
            del request.proposed[len(proposed):]
        request.proposed_masks.extend(masks)
        return proposed
