//! idcar's core, shared by the server, the campaign and the benches: the six ID layouts
//! ([`layout`]), the generator that issues IDs under a window a lease gives it ([`generator`]),
//! the binary protocol's frame ([`frame`]) and the clock and randomness seams ([`clock`]).
//! Pure: nothing here reads a clock or does I/O; the time and random bits are given.

pub mod clock;
pub mod frame;
pub mod generator;
pub mod layout;
