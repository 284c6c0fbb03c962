//! Report renderers: terminal, JSON, HTML, Markdown issue text, repro scripts
