"""Chat templates: how a served prompt is wrapped, as token ids around the user's message.

A draft learns the target's predictions on the text it was trained on. When the server renders
prompts through a chat template the draft never saw (or another one than it was trained on),
the draft is asked about sequences outside its training distribution. The lab fault
`chat-template` and the doctor's prompt-format check both wrap a prompt the same way:
`template_parts` renders the template for one user message (with the generation prompt, so the
model continues after the assistant header) around a sentinel, and splits the text there;
`wrap` puts the prefix and suffix ids around the message's ids.

A template is a Jinja string, as in a tokenizer_config.json's `chat_template`; `RAW` (the empty
string) means no template: the prompt is fed as it is (how the lab's drafts were trained).

SOURCES

| template | source |
|---|---|
| `QWEN2_CHATML` (ChatML with Qwen2's default system prompt) | the Jinja template quoted in sglang 0.5.23 lang/chat_template.py:136, from Qwen2-72B-Instruct's tokenizer_config.json; the role markers equal that file's `chatml` and `qwen` ChatTemplates (:105-149) |
"""

from __future__ import annotations

from eagle3lab.errors import EagleLabError

RAW = ""  # no template: the prompt as it is
QWEN2_CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_SENTINEL = "\x00eagle3lab-message\x00"


class TemplateError(EagleLabError):
    """A chat template that cannot wrap one user message."""


def template_text(value) -> str | None:
    """The template string of a tokenizer_config.json `chat_template` (a string, or transformers'
    list of {name, template} with a "default"), None when there is none."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {d.get("name"): d.get("template") for d in value if isinstance(d, dict)}
        return named.get("default") or next(iter(named.values()), None)
    raise TemplateError(f"chat_template must be a string or a list of named templates, got {type(value).__name__}")


def template_parts(tokenizer, template: str | None) -> tuple[list[int], list[int]]:
    """(prefix ids, suffix ids) the template puts around one user message, generation prompt
    included; ([], []) for `RAW` / None."""
    if not template:
        return [], []
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": _SENTINEL}], chat_template=template,
                                             tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # jinja2 raises many types for a broken template
        raise TemplateError(f"the chat template does not render one user message ({type(exc).__name__}: "
                            f"{exc})") from None
    if not isinstance(text, str) or text.count(_SENTINEL) != 1:
        raise TemplateError("the chat template does not place the user's message exactly once")
    prefix, suffix = text.split(_SENTINEL)
    encode = lambda s: tokenizer(s, add_special_tokens=False)["input_ids"] if s else []  # noqa: E731
    return list(encode(prefix)), list(encode(suffix))


def wrap(ids, parts: tuple[list[int], list[int]]) -> list[int]:
    """The message's ids inside the template's prefix and suffix."""
    prefix, suffix = parts
    return list(prefix) + list(ids) + list(suffix)


def describe(template: str | None, limit: int = 160) -> str:
    """What a template makes of one user message, for evidence text: the rendered prompt with
    `{message}` in place of the message ('raw text (no template)' for RAW), else a quote of
    its source when it does not render without a tokenizer."""
    if not template:
        return "raw text (no template)"
    try:
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        # transformers 5.19 utils/chat_template_utils.py _compile_jinja_template: same environment flags
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[jinja2.ext.loopcontrols])
        text = env.from_string(str(template)).render(messages=[{"role": "user", "content": "{message}"}],
                                                     add_generation_prompt=True)
        return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."
    except Exception:  # noqa: BLE001  (jinja2 raises many types; the source quote still says something)
        text = str(template)
        return "template " + repr(text[:limit // 2]) + ("..." if len(text) > limit // 2 else "")
