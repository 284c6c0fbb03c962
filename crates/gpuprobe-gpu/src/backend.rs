//! The one interface the probes are written against, with a CUDA and a HIP implementation
//! (`cuda.rs`, `hip.rs`), and the owning wrappers that give buffers, streams, events and
//! modules back to the runtime when they go out of scope.
//!
//! The trait speaks in raw handles so it stays object-safe and small; everything above it
//! uses the wrappers.

use serde::{Deserialize, Serialize};

use crate::error::{GpuError, GpuResult};

/// A device address.
pub(crate) type DevicePtr = u64;

/// Which vendor runtime a backend drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    /// The CUDA driver API.
    Cuda,
    /// The HIP runtime.
    Hip,
}

impl RuntimeKind {
    /// Lowercase name (`cuda`, `hip`).
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Cuda => "cuda",
            RuntimeKind::Hip => "hip",
        }
    }
}

/// What the runtime says about one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Ordinal in the runtime's enumeration.
    pub ordinal: u32,
    /// Marketing name.
    pub name: String,
    /// Architecture: `sm_90` on NVIDIA, the gcnArchName (`gfx1100`, `gfx90a:sramecc+:xnack-`)
    /// on AMD.
    pub arch: String,
    /// Total device memory in bytes, as reported (not trusted for sizing on APUs).
    pub total_memory: u64,
    /// PCI bus id (`0000:00:06.0`).
    pub pci_bus_id: Option<String>,
    /// Streaming multiprocessors / compute units.
    pub multiprocessors: u32,
    /// Resident threads per multiprocessor.
    pub max_threads_per_multiprocessor: u32,
    /// Whether the device shares memory with the host (APU).
    pub integrated: bool,
}

/// Free and total device memory, from `cuMemGetInfo` / `hipMemGetInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemInfo {
    /// Free bytes.
    pub free: u64,
    /// Total bytes.
    pub total: u64,
}

/// Versions and files of the runtime in use.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RuntimeVersions {
    /// Driver version (`13.0` from `cuDriverGetVersion`, HIP's `hipDriverGetVersion`).
    pub driver: Option<String>,
    /// Runtime version (`6.3.42134` from `hipRuntimeGetVersion`; for CUDA the driver API
    /// version is the runtime).
    pub runtime: Option<String>,
    /// The runtime library file in use.
    pub library: Option<String>,
}

/// A kernel image a backend can load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleImage {
    /// PTX text (CUDA); JIT-compiled by the driver.
    Ptx(String),
    /// A CUDA cubin for the device's exact architecture.
    Cubin(Vec<u8>),
    /// An AMD code object from hipRTC.
    CodeObject(Vec<u8>),
}

/// A kernel argument, passed by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelArg {
    /// A 32-bit unsigned integer.
    U32(u32),
    /// A 64-bit unsigned integer.
    U64(u64),
    /// A device pointer.
    Ptr(DevicePtr),
}

/// Opaque runtime handle (stream, event, module or function).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle(pub usize);

/// The operations the probes need from a vendor runtime, bound to one device. Every call
/// returns the runtime's error as a [`GpuError`]; nothing panics.
pub trait DeviceRuntime {
    /// Which runtime this is.
    fn kind(&self) -> RuntimeKind;
    /// The device this backend is bound to.
    fn device(&self) -> &DeviceInfo;
    /// Runtime versions and files.
    fn versions(&self) -> RuntimeVersions;
    /// Free and total device memory now.
    fn mem_info(&self) -> GpuResult<MemInfo>;
    /// Allocates device memory (plain allocation, never managed memory).
    fn alloc(&self, bytes: usize) -> GpuResult<DevicePtr>;
    /// Frees device memory.
    fn free(&self, ptr: DevicePtr) -> GpuResult<()>;
    /// Allocates page-locked host memory.
    fn alloc_pinned(&self, bytes: usize) -> GpuResult<*mut u8>;
    /// Frees page-locked host memory.
    fn free_pinned(&self, ptr: *mut u8) -> GpuResult<()>;
    /// Synchronous host-to-device copy.
    fn htod(&self, dst: DevicePtr, src: &[u8]) -> GpuResult<()>;
    /// Synchronous device-to-host copy.
    fn dtoh(&self, dst: &mut [u8], src: DevicePtr) -> GpuResult<()>;
    /// Synchronous device-to-device copy.
    fn dtod(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> GpuResult<()>;
    /// Asynchronous host-to-device copy on `stream`.
    ///
    /// # Safety
    /// `src..src+bytes` must stay valid and unmodified until the stream is synchronized.
    unsafe fn htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: Handle,
    ) -> GpuResult<()>;
    /// Asynchronous device-to-host copy on `stream`.
    ///
    /// # Safety
    /// `dst..dst+bytes` must stay valid and otherwise untouched until the stream is
    /// synchronized.
    unsafe fn dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: Handle,
    ) -> GpuResult<()>;
    /// Asynchronous device-to-device copy on `stream`.
    fn dtod_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: Handle,
    ) -> GpuResult<()>;
    /// Sets `bytes` bytes of device memory to `value`.
    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize) -> GpuResult<()>;
    /// Creates a stream.
    fn stream_create(&self) -> GpuResult<Handle>;
    /// Destroys a stream.
    fn stream_destroy(&self, stream: Handle) -> GpuResult<()>;
    /// Waits for a stream.
    fn stream_synchronize(&self, stream: Handle) -> GpuResult<()>;
    /// Creates a timing event.
    fn event_create(&self) -> GpuResult<Handle>;
    /// Destroys an event.
    fn event_destroy(&self, event: Handle) -> GpuResult<()>;
    /// Records an event on a stream.
    fn event_record(&self, event: Handle, stream: Handle) -> GpuResult<()>;
    /// Waits for an event.
    fn event_synchronize(&self, event: Handle) -> GpuResult<()>;
    /// Milliseconds between two completed events.
    fn event_elapsed_ms(&self, start: Handle, end: Handle) -> GpuResult<f32>;
    /// Loads a module.
    fn module_load(&self, image: &ModuleImage) -> GpuResult<Handle>;
    /// Unloads a module.
    fn module_unload(&self, module: Handle) -> GpuResult<()>;
    /// Looks a kernel up by its (unmangled) name.
    fn module_function(&self, module: Handle, name: &str) -> GpuResult<Handle>;
    /// Launches a kernel on a 1-D grid.
    fn launch(
        &self,
        function: Handle,
        grid: u32,
        block: u32,
        args: &[KernelArg],
        stream: Handle,
    ) -> GpuResult<()>;
    /// Waits for all work on the device.
    fn synchronize(&self) -> GpuResult<()>;
}

/// Device memory that is freed when dropped.
pub(crate) struct DeviceBuffer<'b> {
    backend: &'b dyn DeviceRuntime,
    ptr: DevicePtr,
    bytes: usize,
}

impl<'b> DeviceBuffer<'b> {
    /// Allocates `bytes` bytes.
    pub(crate) fn new(backend: &'b dyn DeviceRuntime, bytes: usize) -> GpuResult<Self> {
        let ptr = backend.alloc(bytes)?;
        Ok(DeviceBuffer {
            backend,
            ptr,
            bytes,
        })
    }

    /// The device address.
    pub(crate) fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        // A failing free leaves nothing to recover; the next call reports the device state.
        let _ = self.backend.free(self.ptr);
    }
}

/// Page-locked host memory that is freed when dropped.
pub(crate) struct PinnedBuffer<'b> {
    backend: &'b dyn DeviceRuntime,
    ptr: *mut u8,
    bytes: usize,
}

impl<'b> PinnedBuffer<'b> {
    /// Allocates `bytes` bytes of pinned host memory, zero-filled.
    pub(crate) fn new(backend: &'b dyn DeviceRuntime, bytes: usize) -> GpuResult<Self> {
        let ptr = backend.alloc_pinned(bytes.max(1))?;
        if ptr.is_null() {
            return Err(GpuError::HostAlloc { bytes });
        }
        let mut buffer = PinnedBuffer {
            backend,
            ptr,
            bytes,
        };
        buffer.as_mut_slice().fill(0);
        Ok(buffer)
    }

    /// The memory as a mutable slice.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is a live allocation of at least `bytes` bytes owned by this value, it
        // was zero-filled at creation, so every byte is initialised, and `&mut self` makes the
        // access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for PinnedBuffer<'_> {
    fn drop(&mut self) {
        let _ = self.backend.free_pinned(self.ptr);
    }
}

/// A stream that is destroyed when dropped.
pub(crate) struct Stream<'b> {
    backend: &'b dyn DeviceRuntime,
    handle: Handle,
}

impl<'b> Stream<'b> {
    /// Creates a stream.
    pub(crate) fn new(backend: &'b dyn DeviceRuntime) -> GpuResult<Self> {
        Ok(Stream {
            backend,
            handle: backend.stream_create()?,
        })
    }

    /// The raw handle.
    pub(crate) fn handle(&self) -> Handle {
        self.handle
    }

    /// Waits for the stream.
    pub(crate) fn synchronize(&self) -> GpuResult<()> {
        self.backend.stream_synchronize(self.handle)
    }

    /// Copies host memory to the device and waits for the copy, through the asynchronous
    /// API (the path PyTorch's `non_blocking=True` takes).
    pub(crate) fn htod_and_wait(&self, dst: DevicePtr, src: &[u8]) -> GpuResult<()> {
        // SAFETY: `src` is borrowed for this whole call and the stream is synchronized before
        // returning, so the memory outlives the copy.
        let queued = unsafe {
            self.backend
                .htod_async(dst, src.as_ptr(), src.len(), self.handle)
        };
        let waited = self.synchronize();
        queued.and(waited)
    }

    /// Copies device memory to the host and waits for the copy, through the asynchronous API.
    pub(crate) fn dtoh_and_wait(&self, dst: &mut [u8], src: DevicePtr) -> GpuResult<()> {
        // SAFETY: `dst` is exclusively borrowed for this whole call and the stream is
        // synchronized before returning.
        let queued = unsafe {
            self.backend
                .dtoh_async(dst.as_mut_ptr(), src, dst.len(), self.handle)
        };
        let waited = self.synchronize();
        queued.and(waited)
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        let _ = self.backend.stream_destroy(self.handle);
    }
}

/// A timing event that is destroyed when dropped.
pub(crate) struct Event<'b> {
    backend: &'b dyn DeviceRuntime,
    handle: Handle,
}

impl<'b> Event<'b> {
    /// Creates an event.
    pub(crate) fn new(backend: &'b dyn DeviceRuntime) -> GpuResult<Self> {
        Ok(Event {
            backend,
            handle: backend.event_create()?,
        })
    }

    /// Records the event on a stream.
    pub(crate) fn record(&self, stream: &Stream<'_>) -> GpuResult<()> {
        self.backend.event_record(self.handle, stream.handle())
    }

    /// Waits for the event and returns the milliseconds since `start`.
    pub(crate) fn elapsed_since(&self, start: &Event<'_>) -> GpuResult<f64> {
        self.backend.event_synchronize(self.handle)?;
        Ok(f64::from(
            self.backend.event_elapsed_ms(start.handle, self.handle)?,
        ))
    }
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        let _ = self.backend.event_destroy(self.handle);
    }
}

/// Times device work between two events on one stream.
pub(crate) struct EventTimer<'b> {
    start: Event<'b>,
    end: Event<'b>,
}

impl<'b> EventTimer<'b> {
    /// Creates the two events.
    pub(crate) fn new(backend: &'b dyn DeviceRuntime) -> GpuResult<Self> {
        Ok(EventTimer {
            start: Event::new(backend)?,
            end: Event::new(backend)?,
        })
    }

    /// Runs `work` (which queues on `stream`) between the events; returns its result and
    /// the device time in milliseconds.
    pub(crate) fn time<T>(
        &self,
        stream: &Stream<'_>,
        work: impl FnOnce() -> GpuResult<T>,
    ) -> GpuResult<(T, f64)> {
        self.start.record(stream)?;
        let value = work()?;
        self.end.record(stream)?;
        let ms = self.end.elapsed_since(&self.start)?;
        Ok((value, ms))
    }
}

/// A loaded module that is unloaded when dropped.
pub(crate) struct Module<'b> {
    backend: &'b dyn DeviceRuntime,
    handle: Handle,
}

impl<'b> Module<'b> {
    /// Loads an image.
    pub(crate) fn load(backend: &'b dyn DeviceRuntime, image: &ModuleImage) -> GpuResult<Self> {
        Ok(Module {
            backend,
            handle: backend.module_load(image)?,
        })
    }

    /// Looks a kernel up.
    pub(crate) fn function(&self, name: &str) -> GpuResult<Handle> {
        self.backend.module_function(self.handle, name)
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        let _ = self.backend.module_unload(self.handle);
    }
}

/// Median of a list of durations (seconds or milliseconds); `None` when empty.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// Bytes over milliseconds as GB/s (1e9 bytes per second).
pub(crate) fn gbps(bytes: u64, ms: f64) -> f64 {
    if ms <= 0.0 {
        return 0.0;
    }
    bytes as f64 / (ms * 1e-3) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_lists() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn gbps_uses_decimal_units() {
        assert!((gbps(1_000_000_000, 1000.0) - 1.0).abs() < 1e-12);
        assert!((gbps(3_000_000, 1.0) - 3.0).abs() < 1e-12);
        assert_eq!(gbps(5, 0.0), 0.0);
    }
}
