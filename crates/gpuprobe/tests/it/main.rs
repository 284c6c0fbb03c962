//! Integration tests of the gpuprobe binary.
