"""Chat chunks: the fixed strings a processor wraps around environment text.

A conversation is built from these pieces, always cut at special tokens so that each
piece can be tokenized on its own (see :mod:`trl_env.checks.additivity`)::

    bare_prefix                                   (no system prompt), or
    system_prefix + SYSTEM + system_suffix        (with one)
    user_prefix + DELTA + user_suffix             (ends with the generation prompt)
    <model output> + turn_end                     (turn_end sampled, or added by the engine)
    after_turn_end + user_prefix + DELTA + user_suffix
    ...

Example:
    >>> chunks = ChatChunks(
    ...     bare_prefix="", system_prefix="<|im_start|>system\\n", system_suffix="<|im_end|>\\n",
    ...     user_prefix="<|im_start|>user\\n", user_suffix="<|im_end|>\\n<|im_start|>assistant\\n",
    ...     turn_end="<|im_end|>", after_turn_end="\\n")
    >>> chunks.system("Be brief.") + chunks.user("Hi")
    '<|im_start|>system\\nBe brief.<|im_end|>\\n<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trl_env.errors import TemplateError

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class ChatChunks:
    """The strings around system, user and model text in one chat format."""

    bare_prefix: str
    system_prefix: str
    system_suffix: str
    user_prefix: str
    user_suffix: str
    turn_end: str
    after_turn_end: str
    has_system_role: bool = True
    strips_content: bool = False

    def system(self, prompt: str) -> str:
        """The conversation's opening: the system block, or the bare prefix when ``prompt`` is empty.

        Example:
            >>> ChatChunks("<s>", "[S]", "[/S]", "[U]", "[/U][A]", "[/A]", "").system("")
            '<s>'
        """
        if not prompt:
            return self.bare_prefix
        if not self.has_system_role:
            raise TemplateError(
                "this chat template has no system role (it folds or rejects system messages); pass "
                "system_prompt='' and put the instructions in the environment's first delta, or use a preset"
            )
        return self.system_prefix + self._content(prompt) + self.system_suffix

    def user(self, delta: str) -> str:
        """One user turn followed by the generation prompt.

        Example:
            >>> ChatChunks("", "[S]", "[/S]", "[U]", "[/U][A]", "[/A]", "").user("hi")
            '[U]hi[/U][A]'
        """
        return self.user_prefix + self._content(delta) + self.user_suffix

    def _content(self, text: str) -> str:
        return text.strip() if self.strips_content else text


def special_token_strings(tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """All special-token strings of ``tokenizer``, longest first (chunks are cut at these).

    Example:
        >>> from trl_env.testing import build_qwen3_tokenizer
        >>> "<|im_end|>" in special_token_strings(build_qwen3_tokenizer())
        True
    """
    found = set(tokenizer.all_special_tokens)
    for token in tokenizer.added_tokens_decoder.values():
        if token.special:
            found.add(token.content)
    return sorted((t for t in found if t), key=len, reverse=True)
