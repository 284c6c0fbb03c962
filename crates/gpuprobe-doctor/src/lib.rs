//! Judge, diagnosis and workaround search
