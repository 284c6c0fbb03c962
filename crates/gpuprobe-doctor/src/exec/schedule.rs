//! Which lanes run when, and with how many CPU threads: the engine's scheduling decisions,
//! kept apart from the threads and processes that carry them out so they can be tested
//! alone.
//!
//! - Lanes placed first ([`Placement::First`]) and admitted when the run starts run alone
//!   on their device before anything else there: every other lane of the device admitted
//!   meanwhile is launched at once behind a closed [`StartGate`] (its worker imports the
//!   framework and says hello while the first lane fills the device), and those gates open
//!   when the device's first lanes have finished. A first lane admitted later (a second
//!   GPU's lanes, planned at GPU 0's hello) waits as an exclusive lane does: by then the
//!   framework is imported and its lanes' workers are ready at once, so there is no start to
//!   hide it behind, and on the H200 host with two GPUs holding them back for it cost 3 s.
//! - Shared and side lanes start as soon as they are admitted (behind a gate while a first
//!   lane holds their device).
//! - Exclusive lanes run one at a time on their device, once every other lane there has
//!   finished: delivered its last result (the engine reports that as the lane's end; its
//!   worker may still be exiting, which only returns device memory). The first exclusive lane of each device is launched at once anyway, behind a
//!   closed [`StartGate`]: its worker imports the framework and says hello while the other
//!   lanes work, and the gate opens when the device is free. Later exclusive lanes of that
//!   device are launched only then.
//! - Each launch carries a CPU thread budget ([`worker_threads`]) from the Python lanes that
//!   compete for the host's cores at that moment; the first admission counts its lanes once
//!   per expected device, since the other GPUs' lanes join it moments later.

use std::collections::HashMap;

use gpuprobe_model::{Backend, DeviceRef, Placement};
use gpuprobe_runner::StartGate;

use crate::plan::Lane;

/// CPU threads for each of `parallel_workers` workers that run side by side on `cores`
/// cores: an even share, rounded up (a little oversubscription costs less than idle cores).
///
/// Without a cap every PyTorch worker starts one thread per core; five lanes on a 16-core
/// H100 host then ran the standard tier 2.8× slower (76-87 s against 28.6 s with 4 threads
/// each, bench/RESULTS.md), most of it in the spin-waits of oversubscribed thread pools.
pub fn worker_threads(cores: usize, parallel_workers: usize) -> usize {
    cores.max(1).div_ceil(parallel_workers.max(1))
}

/// A lane to start now.
pub(crate) struct Launch {
    /// Its id (the order of launches, from 0).
    pub id: usize,
    /// The lane.
    pub lane: Lane,
    /// For a lane launched ahead of its turn (an exclusive lane, or any lane while a first
    /// lane holds its device): the gate that starts its probes.
    pub gate: Option<StartGate>,
    /// CPU threads for its workers.
    pub threads: usize,
}

struct LaneState {
    backend: Backend,
    device: DeviceRef,
    placement: Placement,
    /// Competing for its device and the CPU (false while behind its gate, and once done).
    active: bool,
}

/// The scheduling state of one run.
pub(crate) struct Scheduler {
    cores: usize,
    expected_devices: usize,
    lanes: Vec<LaneState>,
    /// Active lanes per device.
    running: HashMap<DeviceRef, usize>,
    /// Exclusive lanes not launched yet, in order.
    queued: Vec<Lane>,
    /// Launched exclusive lanes whose gate is still closed: (lane id, gate).
    gated: Vec<(usize, StartGate)>,
    /// First lanes not launched yet (another first lane holds their device), in order.
    openings: Vec<Lane>,
    /// Launched lanes waiting for their device's first lanes to finish: (lane id, gate).
    held: Vec<(usize, StartGate)>,
}

impl Scheduler {
    /// A scheduler for a host with `cores` CPU cores, whose first admitted lanes stand for
    /// `expected_devices` devices (1 when they are all the lanes there will be).
    pub(crate) fn new(cores: usize, expected_devices: usize) -> Self {
        Scheduler {
            cores,
            expected_devices: expected_devices.max(1),
            lanes: Vec::new(),
            running: HashMap::new(),
            queued: Vec::new(),
            gated: Vec::new(),
            openings: Vec::new(),
            held: Vec::new(),
        }
    }

    /// Takes new lanes (empty ones are dropped) and says which to launch now, followed by
    /// whatever [`Scheduler::release`] frees.
    pub(crate) fn admit(&mut self, lanes: Vec<Lane>) -> Vec<Launch> {
        let mut lanes: Vec<Lane> = lanes.into_iter().filter(|l| !l.tasks.is_empty()).collect();
        // First lanes are seen first, so that the lanes admitted with them wait for them.
        lanes.sort_by_key(|l| l.placement != Placement::First);
        let new_python = lanes
            .iter()
            .filter(|l| l.backend == Backend::Python && l.placement != Placement::Exclusive)
            .count();
        let competing = if self.lanes.is_empty() {
            new_python * self.expected_devices
        } else {
            self.python_active() + new_python
        };
        let threads = worker_threads(self.cores, competing);
        let at_start = self.lanes.is_empty();
        let mut launches = Vec::new();
        for lane in lanes {
            match lane.placement {
                // Too late to be first: it waits as an exclusive lane does.
                Placement::First if !at_start => self.queued.push(lane),
                Placement::First if self.has_opening(lane.device) => self.openings.push(lane),
                Placement::First => launches.push(self.launch(lane, None, threads)),
                Placement::Exclusive if self.has_exclusive(lane.device) => self.queued.push(lane),
                Placement::Exclusive => {
                    let (launch, gate) = self.launch_behind_gate(lane, threads);
                    self.gated.push((launch.id, gate));
                    launches.push(launch);
                }
                Placement::Shared | Placement::Side if self.has_opening(lane.device) => {
                    let (launch, gate) = self.launch_behind_gate(lane, threads);
                    self.held.push((launch.id, gate));
                    launches.push(launch);
                }
                Placement::Shared | Placement::Side => {
                    launches.push(self.launch(lane, None, threads))
                }
            }
        }
        launches.extend(self.release());
        launches
    }

    /// On every device with no active first lane: launches its next queued first lane, or
    /// else opens the gates of the lanes that waited for its first lanes. Then, on every
    /// device with no active lane: opens the gate of its launched exclusive lane, or else
    /// launches its next queued one.
    pub(crate) fn release(&mut self) -> Vec<Launch> {
        let mut launches = Vec::new();
        let mut waiting: Vec<DeviceRef> = self.openings.iter().map(|l| l.device).collect();
        waiting.extend(self.held.iter().map(|(id, _)| self.lanes[*id].device));
        for device in waiting {
            if self.first_active(device) {
                continue;
            }
            if let Some(index) = self.openings.iter().position(|l| l.device == device) {
                let lane = self.openings.remove(index);
                let threads = worker_threads(self.cores, self.python_active() + 1);
                launches.push(self.launch(lane, None, threads));
                continue;
            }
            let (opened, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
                .into_iter()
                .partition(|(id, _)| self.lanes[*id].device == device);
            self.held = still;
            for (id, gate) in opened {
                self.open(id, &gate);
            }
        }
        let mut devices: Vec<DeviceRef> = self.queued.iter().map(|l| l.device).collect();
        devices.extend(self.gated.iter().map(|(id, _)| self.lanes[*id].device));
        for device in devices {
            if self.running(device) > 0 || self.has_opening(device) {
                continue;
            }
            if let Some(index) = self
                .gated
                .iter()
                .position(|(id, _)| self.lanes[*id].device == device)
            {
                let (id, gate) = self.gated.remove(index);
                self.open(id, &gate);
            } else if let Some(index) = self.queued.iter().position(|l| l.device == device) {
                let lane = self.queued.remove(index);
                let threads = worker_threads(self.cores, self.python_active() + 1);
                launches.push(self.launch(lane, None, threads));
            }
        }
        launches
    }

    /// Records that lane `id` has finished (a gated lane may finish before its gate opens,
    /// when its worker cannot start) and says what that frees. Saying it twice (at the
    /// lane's last result and again when its worker has exited) is the same as once.
    pub(crate) fn finished(&mut self, id: usize) -> Vec<Launch> {
        let Some(state) = self.lanes.get_mut(id) else {
            return Vec::new();
        };
        if state.active {
            state.active = false;
            if let Some(count) = self.running.get_mut(&state.device) {
                *count = count.saturating_sub(1);
            }
        }
        self.gated.retain(|(gated, _)| *gated != id);
        self.held.retain(|(held, _)| *held != id);
        self.release()
    }

    /// The CPU threads each Python worker may use now: an even share of the cores among the
    /// Python lanes that compete for them (`None` while none does).
    pub(crate) fn python_threads(&self) -> Option<usize> {
        let competing = self.python_active();
        (competing > 0).then(|| worker_threads(self.cores, competing))
    }

    /// Whether any lane is active or waits behind its gate.
    pub(crate) fn busy(&self) -> bool {
        self.running.values().any(|n| *n > 0) || !self.gated.is_empty() || !self.held.is_empty()
    }

    /// The backend and device of lane `id`.
    pub(crate) fn lane(&self, id: usize) -> Option<(Backend, DeviceRef)> {
        self.lanes.get(id).map(|l| (l.backend, l.device))
    }

    fn launch(&mut self, lane: Lane, gate: Option<StartGate>, threads: usize) -> Launch {
        let id = self.lanes.len();
        self.lanes.push(LaneState {
            backend: lane.backend,
            device: lane.device,
            placement: lane.placement,
            active: false,
        });
        if gate.is_none() {
            self.activate(id);
        }
        Launch {
            id,
            lane,
            gate,
            threads,
        }
    }

    /// Launches `lane` with its gate closed: it is not active until [`Scheduler::open`].
    fn launch_behind_gate(&mut self, lane: Lane, threads: usize) -> (Launch, StartGate) {
        let gate = StartGate::new();
        let launch = self.launch(lane, Some(gate.clone()), threads);
        (launch, gate)
    }

    /// Lets gated lane `id` start: it competes for its device from now.
    fn open(&mut self, id: usize, gate: &StartGate) {
        self.activate(id);
        gate.open();
    }

    fn activate(&mut self, id: usize) {
        let state = &mut self.lanes[id];
        state.active = true;
        *self.running.entry(state.device).or_default() += 1;
    }

    fn running(&self, device: DeviceRef) -> usize {
        self.running.get(&device).copied().unwrap_or(0)
    }

    /// Whether a first lane is active on `device`.
    fn first_active(&self, device: DeviceRef) -> bool {
        self.lanes
            .iter()
            .any(|l| l.active && l.device == device && l.placement == Placement::First)
    }

    /// Whether a first lane holds `device` or waits for it.
    fn has_opening(&self, device: DeviceRef) -> bool {
        self.first_active(device) || self.openings.iter().any(|l| l.device == device)
    }

    fn has_exclusive(&self, device: DeviceRef) -> bool {
        self.queued.iter().any(|l| l.device == device)
            || self
                .gated
                .iter()
                .any(|(id, _)| self.lanes[*id].device == device)
    }

    /// Python lanes that compete for the CPU now (a gated lane only waits).
    fn python_active(&self) -> usize {
        self.lanes
            .iter()
            .filter(|l| l.active && l.backend == Backend::Python)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::ProbeSpec;
    use gpuprobe_runner::Task;

    fn lane(backend: Backend, device: u32, placement: Placement) -> Lane {
        let spec = ProbeSpec {
            backend,
            placement,
            ..crate::test_support::spec("t.probe")
        };
        Lane {
            backend,
            device: DeviceRef::Gpu(device),
            placement,
            tasks: vec![Task {
                spec,
                device: DeviceRef::Gpu(device),
            }],
        }
    }

    fn ids(launches: &[Launch]) -> Vec<usize> {
        launches.iter().map(|l| l.id).collect()
    }

    #[test]
    fn worker_threads_share_the_cores_rounding_up() {
        assert_eq!(worker_threads(16, 5), 4);
        assert_eq!(worker_threads(16, 4), 4);
        assert_eq!(worker_threads(16, 1), 16);
        assert_eq!(worker_threads(16, 0), 16, "no competing lanes: all cores");
        assert_eq!(worker_threads(2, 5), 1, "never below one thread");
        assert_eq!(worker_threads(0, 3), 1);
    }

    #[test]
    fn the_first_exclusive_lane_launches_at_once_behind_a_gate_that_opens_when_the_device_is_free()
    {
        let mut scheduler = Scheduler::new(16, 1);
        let launches = scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Exclusive),
            lane(Backend::Native, 0, Placement::Exclusive),
            lane(Backend::Native, 0, Placement::Shared),
        ]);
        // Shared, side, the first exclusive (gated) and the native shared lane; the second
        // exclusive lane is queued.
        assert_eq!(ids(&launches), [0, 1, 2, 3]);
        let gate = launches[2]
            .gate
            .clone()
            .expect("the exclusive lane is gated");
        assert!(
            launches
                .iter()
                .filter(|l| l.id != 2)
                .all(|l| l.gate.is_none())
        );
        assert!(!gate.is_open());
        // Two Python lanes compete for 16 cores: 8 threads each.
        assert!(launches.iter().all(|l| l.threads == 8));

        assert!(scheduler.finished(0).is_empty());
        assert!(scheduler.finished(3).is_empty());
        assert!(!gate.is_open(), "the side lane still runs");
        assert!(scheduler.finished(1).is_empty());
        assert!(gate.is_open(), "the device is free");
        assert!(scheduler.busy());

        // The native exclusive lane follows the Python one, not beside it.
        let next = scheduler.finished(2);
        assert_eq!(ids(&next), [4]);
        assert!(next[0].gate.is_none());
        assert_eq!(next[0].lane.backend, Backend::Native);
        assert!(scheduler.finished(4).is_empty());
        assert!(!scheduler.busy());
    }

    #[test]
    fn a_first_lane_runs_alone_while_the_others_start_behind_gates() {
        let mut scheduler = Scheduler::new(16, 1);
        // Listed after the others: it is still the one that starts the device.
        let launches = scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Exclusive),
            lane(Backend::Native, 0, Placement::Shared),
            lane(Backend::Native, 0, Placement::First),
            lane(Backend::Python, 1, Placement::Shared),
        ]);
        let by_placement = |device: u32, placement: Placement, backend: Backend| {
            launches
                .iter()
                .find(|l| {
                    l.lane.device == DeviceRef::Gpu(device)
                        && l.lane.placement == placement
                        && l.lane.backend == backend
                })
                .expect("launched")
        };
        let first = by_placement(0, Placement::First, Backend::Native);
        assert!(first.gate.is_none(), "the first lane starts at once");
        let shared = by_placement(0, Placement::Shared, Backend::Python)
            .gate
            .clone()
            .expect("held behind the first lane");
        let native = by_placement(0, Placement::Shared, Backend::Native)
            .gate
            .clone()
            .expect("held behind the first lane");
        let exclusive = by_placement(0, Placement::Exclusive, Backend::Python)
            .gate
            .clone()
            .expect("gated");
        assert!(
            by_placement(1, Placement::Shared, Backend::Python)
                .gate
                .is_none(),
            "another device is not held"
        );
        assert!(!shared.is_open() && !native.is_open() && !exclusive.is_open());
        assert_eq!(
            scheduler.python_threads(),
            Some(16),
            "only GPU 1's lane works"
        );

        // The first lane ends: the held lanes start, the exclusive lane still waits for them.
        assert!(scheduler.finished(first.id).is_empty());
        assert!(shared.is_open() && native.is_open());
        assert!(!exclusive.is_open());
        assert_eq!(scheduler.python_threads(), Some(8));
        let shared_id = by_placement(0, Placement::Shared, Backend::Python).id;
        let native_id = by_placement(0, Placement::Shared, Backend::Native).id;
        scheduler.finished(shared_id);
        scheduler.finished(native_id);
        assert!(exclusive.is_open(), "then the device is free");
    }

    #[test]
    fn a_first_lane_admitted_after_the_start_runs_at_the_end_and_holds_nothing_back() {
        let mut scheduler = Scheduler::new(16, 1);
        scheduler.admit(vec![
            lane(Backend::Native, 0, Placement::First),
            lane(Backend::Python, 0, Placement::Shared),
        ]);
        // GPU 1's lanes, planned at GPU 0's hello: its workers are ready at once.
        let later = scheduler.admit(vec![
            lane(Backend::Native, 1, Placement::First),
            lane(Backend::Python, 1, Placement::Shared),
        ]);
        assert_eq!(ids(&later), [2], "only the shared lane launches");
        assert!(later[0].gate.is_none(), "and nothing holds it back");
        let next = scheduler.finished(2);
        assert_eq!(ids(&next), [3], "the first lane runs once GPU 1 is free");
        assert_eq!(next[0].lane.placement, Placement::First);
    }

    #[test]
    fn first_lanes_follow_one_another_and_a_late_one_waits_like_an_exclusive_lane() {
        let mut scheduler = Scheduler::new(16, 1);
        let launches = scheduler.admit(vec![
            lane(Backend::Native, 0, Placement::First),
            lane(Backend::Python, 0, Placement::First),
            lane(Backend::Python, 0, Placement::Side),
        ]);
        assert_eq!(ids(&launches), [0, 1], "the second first lane is queued");
        let side = launches[1].gate.clone().expect("held");
        let next = scheduler.finished(0);
        assert_eq!(ids(&next), [2]);
        assert_eq!(next[0].lane.placement, Placement::First);
        assert!(!side.is_open(), "still held by the second first lane");
        assert!(scheduler.finished(2).is_empty());
        assert!(side.is_open());

        // Admitted once the side lane works on the device: too late to be first.
        assert!(
            scheduler
                .admit(vec![lane(Backend::Native, 0, Placement::First)])
                .is_empty()
        );
        let next = scheduler.finished(1);
        assert_eq!(ids(&next), [3], "it ran once the device was free");
        assert!(scheduler.finished(3).is_empty());
        assert!(!scheduler.busy());
    }

    #[test]
    fn a_held_lane_that_ends_before_its_gate_opens_is_not_waited_for() {
        let mut scheduler = Scheduler::new(8, 1);
        let launches = scheduler.admit(vec![
            lane(Backend::Native, 0, Placement::First),
            lane(Backend::Python, 0, Placement::Shared),
        ]);
        // Its worker could not start (no Python): the lane ends while held.
        assert!(scheduler.finished(1).is_empty());
        assert!(scheduler.busy(), "the first lane still runs");
        assert!(launches[1].gate.as_ref().is_some_and(|g| !g.is_open()));
        assert!(scheduler.finished(0).is_empty());
        assert!(!scheduler.busy());
    }

    #[test]
    fn a_lane_finished_twice_frees_its_device_once() {
        // The engine says a lane has finished at its last result and again when its worker
        // has exited: the second time must neither free the device a second time nor launch
        // the queued lane beside the one the first call launched.
        let mut scheduler = Scheduler::new(16, 1);
        let launches = scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Exclusive),
            lane(Backend::Python, 0, Placement::Exclusive),
        ]);
        assert_eq!(ids(&launches), [0, 1, 2]);
        let gate = launches[2].gate.clone().unwrap();
        assert!(scheduler.finished(0).is_empty());
        assert!(scheduler.finished(0).is_empty());
        assert!(!gate.is_open(), "the side lane still holds the device");
        assert!(scheduler.finished(1).is_empty());
        assert!(gate.is_open());
        let next = scheduler.finished(2);
        assert_eq!(ids(&next), [3]);
        assert!(
            scheduler.finished(2).is_empty(),
            "lane 3 already runs alone"
        );
        assert!(scheduler.finished(1).is_empty());
        assert!(scheduler.busy(), "lane 3 still runs");
        assert!(scheduler.finished(3).is_empty());
        assert!(!scheduler.busy());
    }

    #[test]
    fn the_python_thread_share_grows_as_python_lanes_finish() {
        let mut scheduler = Scheduler::new(16, 1);
        assert_eq!(scheduler.python_threads(), None, "no lane yet");
        scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Native, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Exclusive),
        ]);
        // Three Python lanes compete (the native lane and the gated one do not).
        assert_eq!(scheduler.python_threads(), Some(6));
        scheduler.finished(3);
        assert_eq!(
            scheduler.python_threads(),
            Some(6),
            "a native lane held no share"
        );
        scheduler.finished(0);
        assert_eq!(scheduler.python_threads(), Some(8));
        scheduler.finished(1);
        scheduler.finished(2);
        // The exclusive lane's gate opened: it runs alone with every core.
        assert_eq!(scheduler.python_threads(), Some(16));
        scheduler.finished(4);
        assert_eq!(scheduler.python_threads(), None);
    }

    #[test]
    fn devices_are_scheduled_apart() {
        let mut scheduler = Scheduler::new(32, 1);
        let first = scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Exclusive),
        ]);
        let gate0 = first[1].gate.clone().unwrap();
        // GPU 1's lanes arrive later (after GPU 0's hello); its exclusive lane gets a gate
        // of its own, and the busy GPU 0 does not hold it back.
        let second = scheduler.admit(vec![lane(Backend::Python, 1, Placement::Exclusive)]);
        let gate1 = second[0].gate.clone().unwrap();
        assert!(gate1.is_open(), "nothing else runs on GPU 1");
        assert!(!gate0.is_open());
        assert!(scheduler.finished(0).is_empty());
        assert!(gate0.is_open());
    }

    #[test]
    fn a_gated_lane_that_ends_before_its_gate_opens_frees_nothing_it_never_held() {
        let mut scheduler = Scheduler::new(8, 1);
        let launches = scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Exclusive),
            lane(Backend::Python, 0, Placement::Exclusive),
        ]);
        assert_eq!(ids(&launches), [0, 1]);
        // The gated worker could not start: its lane ends early. The shared lane still
        // holds the device, so the queued exclusive lane must still wait.
        assert!(scheduler.finished(1).is_empty());
        assert!(scheduler.busy());
        let next = scheduler.finished(0);
        assert_eq!(ids(&next), [2]);
        assert!(scheduler.finished(2).is_empty());
        assert!(!scheduler.busy());
    }

    #[test]
    fn thread_budgets_follow_the_python_lanes_that_compete() {
        let mut scheduler = Scheduler::new(16, 1);
        let launches = scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Native, 0, Placement::Shared),
        ]);
        assert!(
            launches.iter().all(|l| l.threads == 4),
            "16 cores, 5 Python lanes"
        );
        // A second GPU's lanes join the 5 that run: 10 compete.
        let more = scheduler.admit(vec![
            lane(Backend::Python, 1, Placement::Shared),
            lane(Backend::Python, 1, Placement::Side),
            lane(Backend::Python, 1, Placement::Side),
            lane(Backend::Python, 1, Placement::Side),
            lane(Backend::Python, 1, Placement::Side),
        ]);
        assert!(more.iter().all(|l| l.threads == 2));
    }

    #[test]
    fn the_first_lanes_leave_cores_for_the_gpus_still_to_come() {
        // 8 GPUs on 128 cores: GPU 0's 5 Python lanes get a fortieth of the host each, not
        // a fifth, since 35 more lanes join them once GPU 0's worker has counted the GPUs.
        let mut scheduler = Scheduler::new(128, 8);
        let first = scheduler.admit(vec![
            lane(Backend::Python, 0, Placement::Shared),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Side),
            lane(Backend::Python, 0, Placement::Side),
        ]);
        assert!(first.iter().all(|l| l.threads == 4), "⌈128 / 40⌉");
        let second = scheduler.admit(vec![
            lane(Backend::Python, 1, Placement::Shared),
            lane(Backend::Python, 1, Placement::Side),
        ]);
        assert!(
            second.iter().all(|l| l.threads == 19),
            "⌈128 / 7⌉: the lanes that run"
        );
    }
}
