//! Integration tests of the engine with scripted workers.

mod placement;
