"""Transcript viewer: one self-contained HTML page for evaluation and training episodes.

Build records with :func:`episode_record` (or read them from JSONL files with
:func:`read_records`) and write the page with :func:`write_page`; the page needs no server
and no network.

Example:
    >>> import tempfile, os
    >>> from trl_env.viewer import write_page
    >>> write_page([], os.path.join(tempfile.mkdtemp(), "view.html")).suffix
    '.html'
"""

from trl_env.viewer.page import write_page
from trl_env.viewer.records import episode_record, read_records, token_texts

__all__ = ["episode_record", "read_records", "token_texts", "write_page"]
