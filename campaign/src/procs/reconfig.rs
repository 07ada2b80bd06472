//! The pool's other parameters, which an operator changes it to in the reconfigure fault.

/// Other parameters for the pool (the reconfigure fault): si53 with 6 MID bits, so that two
/// slots' IDs overlap if instances with both ran at once (slot 2N's IDs under 6 bits, UIN
/// below 128, are slot N's under 5); muid128 the next medallion base (one pool's size on:
/// idcar refuses bases that would overlap); sno80 another sequence range; layouts without
/// parameters another pool size.
pub struct Reconfig {
    /// The flags that set them.
    pub flags: Vec<String>,
    /// The recorded parameters that change, `name=value` as idcar records them.
    pub params: Vec<String>,
    /// The layout with them (to decode the IDs of instances started with them).
    pub layout: std::sync::Arc<dyn idcar_core::layout::Layout>,
    pub medallion_base: u64,
    /// Slots whose IDs under the other parameters are another held slot's under the pool's
    /// (the fault restarts their holder, if it can).
    pub overlapping: Vec<u64>,
}

impl Reconfig {
    pub fn for_layout(name: &str, pool_size: u32) -> anyhow::Result<Reconfig> {
        use idcar_core::layout::{LayoutParams, Param};
        let mut p = LayoutParams::default();
        let (flag, param) = match name {
            "si53" => {
                p.mid_bits = 6;
                ("--mid-bits", Some(Param::MidBits))
            }
            "muid128" => {
                p.medallion_base += 1 << 32;
                ("--medallion-base", Some(Param::MedallionBase))
            }
            "sno80" => {
                p.sequence_max = 60_000;
                ("--sequence-max", Some(Param::SequenceMax))
            }
            _ => ("--pool-size", None),
        };
        let (value, params) = match param {
            Some(param) => {
                let v = p.value(param);
                (v.clone(), vec![format!("{}={v}", &flag[2..])])
            }
            None => ((pool_size + 1).to_string(), Vec::new()),
        };
        Ok(Reconfig {
            flags: vec![flag.to_string(), value],
            params,
            layout: idcar_core::layout::by_name(name, p)
                .map_err(|e| anyhow::anyhow!("--layout: {e}"))?
                .into(),
            medallion_base: p.medallion_base,
            overlapping: if name == "si53" { vec![2, 4] } else { vec![] },
        })
    }
}
