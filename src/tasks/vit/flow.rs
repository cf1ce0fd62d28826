//! The batch flow of the RQ5 pipeline designs, independent of libtorch.
//!
//! [`run_async`] lets `workers` threads produce batches (preprocessing) into a
//! bounded queue of depth `queue` while the caller consumes them (transfer and
//! forward pass), strictly in order: a worker takes the next batch number
//! from a shared counter, and the consumer holds back early arrivals until
//! their turn. [`run_sync`] is the one-at-a-time baseline.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Produces then consumes each of `batches` batches, one at a time.
pub fn run_sync<T, E>(
    batches: usize,
    mut produce: impl FnMut(usize) -> Result<T, E>,
    mut consume: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    for index in 0..batches {
        let item = produce(index)?;
        consume(index, item)?;
    }
    Ok(())
}

/// Produces batches on `workers` threads into a queue of depth `queue` and
/// consumes them in order on the calling thread. The first error (from either
/// side) stops the flow and is returned.
pub fn run_async<T: Send, E: Send>(
    batches: usize,
    queue: usize,
    workers: usize,
    produce: impl Fn(usize) -> Result<T, E> + Sync,
    mut consume: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    let next = AtomicUsize::new(0);
    // Workers stop taking new batches once the consumer has failed.
    let stop = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<(usize, Result<T, E>)>(queue.max(1));
        for _ in 0..workers.max(1) {
            let tx = tx.clone();
            let (next, stop, produce) = (&next, &stop, &produce);
            scope.spawn(move || loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                if index >= batches || stop.load(Ordering::SeqCst) != 0 {
                    break;
                }
                if tx.send((index, produce(index))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let result = consume_in_order(batches, &rx, &mut consume);
        stop.store(1, Ordering::SeqCst);
        // Drain so that blocked workers see the stop flag and exit.
        while rx.recv().is_ok() {}
        result
    })
}

fn consume_in_order<T, E>(
    batches: usize,
    rx: &mpsc::Receiver<(usize, Result<T, E>)>,
    consume: &mut impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    // Results (errors too) that arrived before their turn.
    let mut early: BTreeMap<usize, Result<T, E>> = BTreeMap::new();
    for want in 0..batches {
        let item = loop {
            if let Some(item) = early.remove(&want) {
                break item;
            }
            match rx.recv() {
                Ok((index, item)) if index == want => break item,
                Ok((index, item)) => {
                    early.insert(index, item);
                }
                // Every worker is gone, which only a panicking producer causes.
                Err(_) => return Ok(()),
            }
        };
        consume(want, item?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn async_flow_consumes_every_batch_exactly_once_in_order() {
        for (queue, workers) in [(1, 1), (2, 4), (4, 2), (8, 8)] {
            let produced = Mutex::new(Vec::new());
            let mut consumed = Vec::new();
            run_async::<_, ()>(
                50,
                queue,
                workers,
                |i| {
                    // Uneven work so that workers finish out of order.
                    std::thread::sleep(Duration::from_micros(((i * 37) % 11) as u64 * 100));
                    produced.lock().expect("lock").push(i);
                    Ok(i * 10)
                },
                |i, v| {
                    assert_eq!(v, i * 10);
                    consumed.push(i);
                    Ok(())
                },
            )
            .expect("flow succeeds");
            assert_eq!(
                consumed,
                (0..50).collect::<Vec<_>>(),
                "queue {queue}, workers {workers}"
            );
            let mut produced = produced.into_inner().expect("lock");
            produced.sort();
            assert_eq!(produced, (0..50).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_producer_error_stops_the_flow_and_is_returned() {
        let mut consumed = Vec::new();
        let result = run_async(
            100,
            2,
            3,
            |i| {
                if i == 5 {
                    Err(format!("batch {i}"))
                } else {
                    Ok(i)
                }
            },
            |i, _| {
                consumed.push(i);
                Ok(())
            },
        );
        assert_eq!(result, Err("batch 5".to_owned()));
        assert_eq!(consumed, (0..5).collect::<Vec<_>>());
    }

    #[test]
    fn sync_flow_alternates_produce_and_consume() {
        let log = Mutex::new(Vec::new());
        run_sync::<_, ()>(
            3,
            |i| {
                log.lock().expect("lock").push(format!("p{i}"));
                Ok(i)
            },
            |i, _| {
                log.lock().expect("lock").push(format!("c{i}"));
                Ok(())
            },
        )
        .expect("flow succeeds");
        assert_eq!(
            log.into_inner().expect("lock"),
            ["p0", "c0", "p1", "c1", "p2", "c2"]
        );
    }
}
