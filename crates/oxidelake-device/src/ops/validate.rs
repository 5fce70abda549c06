//! The checks every backend makes of an operator's arguments before it runs them, so
//! that the CPU reference and a device refuse the same inputs with the same errors. In
//! one place, beside the arguments, so that no backend module reads another's.

use arrow::array::{Array, Float32Array};
use oxidelake_core::EngineError;

use crate::ops::{
    HostFilterArgs, JoinArgs, JoinColumn, ProbeRows, VectorDistanceArgs, check_predicates,
};

/// Checks the predicates and projection against the batch's schema.
pub(crate) fn filter_project(args: &HostFilterArgs<'_>) -> Result<(), EngineError> {
    let schema = args.batch.schema();
    let fields = schema.fields();
    check_predicates(&schema, args.predicates)?;
    if let Some(bad) = args.projection.iter().find(|i| **i >= fields.len()) {
        return Err(EngineError::InvalidArgument {
            what: "projection",
            detail: format!("index {bad} out of {} columns", fields.len()),
        });
    }
    Ok(())
}

/// Checks a join's output: one column per field of its schema, build columns and rows
/// only for pairs, a build column only with the build batch.
pub(crate) fn join_output(args: &JoinArgs<'_>) -> Result<(), EngineError> {
    let any = |f: fn(&JoinColumn) -> bool| args.output.iter().any(f);
    let detail = if args.schema.fields().len() != args.output.len() {
        "one column per field of its schema"
    } else if args.rows != ProbeRows::Pairs
        && any(|c| !matches!(c, JoinColumn::Probe(_) | JoinColumn::ProbeRow))
    {
        "a semi or anti join outputs probe columns only"
    } else if args.build.is_none() && any(|c| matches!(c, JoinColumn::Build(_))) {
        "a build column without the build batch"
    } else {
        return Ok(());
    };
    Err(EngineError::InvalidArgument {
        what: "join output",
        detail: detail.into(),
    })
}

/// Checks a vector distance's list type and query length.
pub(crate) fn vector_distance(args: &VectorDistanceArgs<'_>) -> Result<(), EngineError> {
    let dim = args.vectors.value_length() as usize;
    if args
        .vectors
        .values()
        .as_any()
        .downcast_ref::<Float32Array>()
        .is_none()
    {
        return Err(EngineError::unsupported(
            "vector distance",
            format!(
                "vectors of {} (only FixedSizeList<Float32> is covered)",
                args.vectors.value_type()
            ),
        ));
    }
    if args.query.len() != dim {
        return Err(EngineError::InvalidArgument {
            what: "query vector",
            detail: format!(
                "length {} does not match the column's list size {dim}",
                args.query.len()
            ),
        });
    }
    Ok(())
}

/// Checks an upload's widenings against the allocation they write (`memory_bytes`): a
/// width of 1, 2 or 4, offsets and images of the same row count, every span inside the
/// allocation and apart from every other (one widening's images must not overwrite the
/// offsets another reads). A kernel writes through raw addresses, so a span out of
/// bounds would be memory corruption, not an error.
pub(crate) fn widenings(
    memory_bytes: usize,
    widenings: &[crate::device_batch::Widening],
) -> Result<(), EngineError> {
    for w in widenings {
        let (narrow, images) = (w.narrow, w.images);
        let inside = |span: crate::device_batch::Span| {
            span.offset
                .checked_add(span.len)
                .is_some_and(|end| end <= memory_bytes)
        };
        let problem = if !matches!(w.width, 1 | 2 | 4) {
            Some(format!("an offset of {} bytes", w.width))
        } else if images.len % 8 != 0 || narrow.len != w.rows() * w.width {
            Some(format!(
                "{} bytes of offsets {} wide for {} bytes of images",
                narrow.len, w.width, images.len
            ))
        } else if !inside(narrow) || !inside(images) {
            Some(format!("a span past the allocation's {memory_bytes} bytes"))
        } else if narrow.offset % w.width != 0 || images.offset % 8 != 0 {
            Some("a span not aligned to its width".to_string())
        } else {
            None
        };
        if let Some(detail) = problem {
            return Err(EngineError::InvalidArgument {
                what: "image widening",
                detail,
            });
        }
    }
    // No two spans overlap, of one widening or of two. Each is inside the allocation
    // (checked above), so their ends cannot overflow.
    let mut spans: Vec<(usize, usize)> = widenings
        .iter()
        .flat_map(|w| [w.narrow, w.images])
        .filter(|s| s.len > 0)
        .map(|s| (s.offset, s.offset + s.len))
        .collect();
    spans.sort_unstable();
    if spans.windows(2).any(|pair| pair[0].1 > pair[1].0) {
        return Err(EngineError::InvalidArgument {
            what: "image widening",
            detail: "two of the widenings' spans overlap".to_string(),
        });
    }
    Ok(())
}
