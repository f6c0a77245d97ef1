//! Steering's decisions, apart from its tasks: given the signal, the limits
//! in force and what the devices and the meter read, what each device gets
//! now, and when it is written.
//!
//! - `decide`: one tick's decision for a site (the grid loop, the
//!   allocation, the notes the steering state shows);
//! - `alloc`: the fulfilment rules that spread a site power over devices;
//! - `hold`: the grid loop that holds the limits at the meter; `settle`: the
//!   bands and deadbands that keep its writes few;
//! - `der_bounds`, `open_loop`: a utility's DER bounds, and the loop turned
//!   off;
//! - `limits`, `operator`: the limits in force, and a grid operator's
//!   contacts turned into limits;
//! - `report`: when a device is written again and what its state says.
//!
//! Pure: plain data in, plain data out, the time passed in. Nothing here
//! spawns a task, awaits, locks, reads a clock or touches a socket, a file
//! or the store (`tests/it/architecture.rs` checks it); the tasks that do
//! (`control`, `actuator`, `service`) sit beside this folder and call it.

pub mod alloc;
pub mod decide;
pub mod der_bounds;
pub mod hold;
pub mod limits;
pub mod open_loop;
pub mod operator;
pub mod report;
pub mod settle;
