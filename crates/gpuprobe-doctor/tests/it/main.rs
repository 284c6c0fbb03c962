//! Integration tests of the engine with scripted workers.

mod kernel_log;
mod placement;
mod support;
