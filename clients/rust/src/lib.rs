//! A client for [idcar], the unique-ID sidecar: IDs over its Unix socket (the binary
//! protocol), safe to share between threads, with retries across server restarts, optional
//! prefetch, and the text form and fields of every layout computed exactly as `idcar` does.
//! Standard library only; an async connection for tokio is behind the `tokio` feature.
//!
//! [idcar]: https://github.com/idcar/idcar
//!
//! # Example
//!
//! ```no_run
//! use idcar_client::Client;
//!
//! # fn main() -> Result<(), idcar_client::Error> {
//! // The socket: `IDCAR_SOCKET`, else /tmp/idcar.sock (or `Client::connect(path)`).
//! let client = Client::new()?;
//! let id = client.next_id()?;
//! println!("{id}");                       // the server's default text form
//! let fields = id.decode()?;              // as `idcar decode --json` gives them
//! println!("issued at {}", fields.text("time").unwrap_or("?"));
//! let batch = client.ids(500)?;           // asked for in requests of at most 1,000
//! assert_eq!(batch.len(), 500);
//! # Ok(())
//! # }
//! ```
//!
//! IDs of the 8-byte layouts (lable64, ugd60, si53) are also `u64`s
//! ([`Client::next_u64`], [`Id::as_u64`]); every ID has its bytes ([`Id::as_bytes`]), its
//! text form (`Display`) and its fields ([`Id::decode`]).
//!
//! # Decoding without a server
//!
//! ```
//! use idcar_client::Description;
//!
//! let lable64 = Description::for_layout("lable64")?;
//! let id = lable64.parse_id("7e3c018045810093")?;
//! let f = id.decode()?;
//! assert_eq!(f.int("generator"), Some(9));
//! assert_eq!(f.int("cluster"), Some(3));
//! assert_eq!(f.text("time"), Some("2026-11-22T04:25:11.038Z"));
//! assert_eq!(id.as_u64(), Some(0x7e3c_0180_4581_0093));
//! # Ok::<(), idcar_client::Error>(())
//! ```
//!
//! A server describes its layout on every new connection ([`Client::describe`]); offline,
//! [`Description::for_layout`] gives a layout's defaults: set
//! [`params`](Description::params) where the server's flags differ (si53's `mid-bits` and
//! `base-clock`).
//!
//! # Options
//!
//! [`Client::builder`]: the socket, a timeout on every read and write (5 s: a silent server is
//! an error, never a hang), the retry deadline (5 s: "unavailable" answers and a missing,
//! refused or reset socket are retried from 10 ms doubling to 200 ms apart; a refused request
//! is not), prefetch, and how many connections may be open at once (4).
//!
//! # Prefetch: the trade-off
//!
//! Without prefetch every call is one round trip to the sidecar (tens of microseconds). With
//! `prefetch(k)` most calls take an ID from a local buffer that one background thread refills
//! when it falls to the low-water mark (`k / 4`). But an ID carries its time of issue: one
//! that waited in a buffer misstates it, and (for lable64 and sno80) sorts as older than IDs
//! other processes were issued meanwhile. So buffered IDs older than the maximum age (1 s) are
//! dropped, never handed out, and an ID is handed out at most once. Keep `k` at or below what
//! the layout issues per slot within the maximum age (lable64 64,000/s, ugd60 1,024/s, si53
//! 256/ms with 5 MID bits, sno80 16.4 M/s, muid128 1 M/s, uuid7 2^21 per ms).
//!
//! # Errors
//!
//! [`Error`] tells a refused request ([`Error::BadRequest`], never retried) from a server that
//! cannot issue now ([`Error::Unavailable`], after the retry deadline), an unreachable socket
//! ([`Error::Connect`], naming the path), a silent one ([`Error::Timeout`]) and a peer that is
//! not idcar ([`Error::Protocol`]).
//!
//! # Lower level
//!
//! [`Connection`] is one connection without retries, for pipelining (send several requests,
//! then read the answers in order) and for request options ([`RequestOptions`]: sno80's
//! metabyte, muid128 transactions). With the `tokio` feature, `idcar_client::tokio::Connection`
//! is the same on tokio's Unix socket.
//!
//! # UUIDs
//!
//! A uuid7 server issues RFC 9562 version-7 UUIDs: [`Id::uuid_bytes`] gives their 16 bytes,
//! and with the `uuid` feature `Id::to_uuid` and `Client::next_uuid` give a `uuid::Uuid`.
//!
//! The contract every idcar client shares is `clients/SPEC.md` in idcar's repository; the wire
//! protocol is `docs/protocol.md`.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod connection;
mod error;
mod json;
mod layout;
mod prefetch;
mod shared;
pub mod wire;

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod tokio;

pub use client::{Builder, Client, DEFAULT_SOCKET, MAX_REQUEST};
pub use connection::Connection;
pub use error::{Error, Result};
pub use layout::{Decoded, Description, Id, Value};
pub use wire::{Ids, RequestOptions};

/// The README's examples are compiled as doctests, so they cannot drift from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
