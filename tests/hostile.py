"""Hostile user strings (docs/design.md, code rule 6): every renderer, argv and table cell must carry them
literally. Import ``HOSTILE`` and parametrize with ``ids=HOSTILE_IDS``."""

HOSTILE: list[str] = [
    "it's a \"quoted\" name",
    "line one\nline two",
    "$(touch /tmp/pwned) and `id`",
    "#SBATCH --partition=evil",
    "ünïcødé 训练 🚀",
    "-leading-dash",
    "back\\slash and $HOME and ${PATH}",
    "[red]x[/red] rich markup",
    "tab\there; semi; & amp | pipe > gt",
]
HOSTILE_IDS = ["quotes", "newline", "cmdsubst", "sbatch", "unicode", "dash", "backslash", "markup", "shellmeta"]
