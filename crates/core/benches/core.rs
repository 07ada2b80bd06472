//! In-process benchmarks of the pure core: lable64 pack/unpack and the generator's cost per ID.
//!
//! `cargo bench --bench core`. The generator benchmark issues whole ticks (64 IDs) with a fake
//! clock that moves on whenever a tick is spent, so it measures the state machine and packing,
//! not waiting.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use idcar_core::generator::{Generator, Take, Window};
use idcar_core::layout::lable64::Fields;
use idcar_core::layout::{by_name, LayoutParams, RequestOptions, Run};

/// The lable64 layout for cluster 11, as every benchmark here uses it.
fn layout11() -> Box<dyn idcar_core::layout::Layout> {
    by_name(
        "lable64",
        LayoutParams {
            cluster: 11,
            ..Default::default()
        },
    )
    .unwrap()
}

fn layout(c: &mut Criterion) {
    let f = Fields {
        timestamp_ms: 1_795_321_511_051,
        sequence: 17,
        generator: 42,
        cluster: 11,
    };
    let id = f.pack().unwrap();
    let mut g = c.benchmark_group("lable64");
    g.throughput(Throughput::Elements(1));
    g.bench_function("pack", |b| b.iter(|| black_box(black_box(f).pack())));
    g.bench_function("unpack", |b| {
        b.iter(|| black_box(Fields::unpack(black_box(id))))
    });
    let l = layout11();
    let mut s = String::with_capacity(32);
    g.bench_function("format_hex", |b| {
        b.iter(|| {
            s.clear();
            l.format(
                black_box(&id.to_be_bytes()),
                idcar_core::layout::TextForm::Hex,
                &mut s,
            )
        })
    });
    g.bench_function("parse_hex", |b| {
        b.iter(|| l.parse(black_box("cb54ecf284000000"), None))
    });
    g.finish();
}

fn generator(c: &mut Criterion) {
    let l = layout11();
    let mut g = c.benchmark_group("generator");
    for batch in [1u32, 64, 1024] {
        g.throughput(Throughput::Elements(u64::from(batch)));
        g.bench_function(format!("next_batch_{batch}"), |b| {
            let mut gen = Generator::new(l.scheme());
            gen.set_window(Some(Window {
                slot: 42,
                floor: 0,
                mark: u64::MAX / 2,
                generation: 1,
            }));
            let mut now = 1u64;
            let mut out: Vec<u8> = Vec::with_capacity(batch as usize * 8);
            b.iter(|| {
                out.clear();
                let mut left = batch;
                while left > 0 {
                    match gen.take(now, left) {
                        Ok(Take::Run(run)) => {
                            l.pack_run(&run, &RequestOptions::default(), run.len, &mut out);
                            left -= run.len;
                        }
                        Ok(Take::WaitFor { tick }) => now = tick,
                        Err(e) => panic!("{e}"),
                    }
                }
                black_box(&out);
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("pack_run");
    g.throughput(Throughput::Elements(64));
    // uuid7: 16 bytes, a seed per run, 24 random bits and a check byte per ID.
    let u = idcar_core::layout::by_name("uuid7", idcar_core::layout::LayoutParams::default())
        .expect("uuid7 builds");
    for (name, layout) in [("lable64_64", &l), ("uuid7_64", &u)] {
        let mut out = Vec::with_capacity(64 * layout.width());
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                layout.pack_run(
                    black_box(&Run {
                        tick: 1_795_321_511_051,
                        seq: 0,
                        len: 64,
                        slot: 42,
                        timeline: 0,
                    }),
                    &RequestOptions::default(),
                    64,
                    &mut out,
                );
            })
        });
    }
    g.finish();
}

criterion_group!(benches, layout, generator);
criterion_main!(benches);
