//! Mann–Whitney's rank test: two-sided, exact up to 30 values a side (no
//! ties assumed), normal beyond, for `compare`'s p-value over two sides'
//! runs; one-sided with the normal form, for the warming check of a run's
//! batches.

/// Two-sided p-value of Mann–Whitney's U for `a` against `b`.
pub fn two_sided(a: &[f64], b: &[f64]) -> f64 {
    let (m, n) = (a.len(), b.len());
    // U: pairs where b's value is larger (ties count half), doubled to stay whole.
    let u2: usize = a
        .iter()
        .map(|x| {
            b.iter()
                .map(|y| match y.total_cmp(x) {
                    std::cmp::Ordering::Greater => 2,
                    std::cmp::Ordering::Equal => 1,
                    std::cmp::Ordering::Less => 0,
                })
                .sum::<usize>()
        })
        .sum();
    let u = u2 as f64 / 2.0;
    let p = if m <= 30 && n <= 30 {
        let dist = u_distribution(m, n);
        let (low, high) = (u.floor() as usize, u.ceil() as usize);
        let below: f64 = dist[..=low].iter().sum();
        let above: f64 = dist[high..].iter().sum();
        2.0 * below.min(above)
    } else {
        let (mf, nf) = (m as f64, n as f64);
        let mean = mf * nf / 2.0;
        let sd = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
        let z = ((u - mean).abs() - 0.5).max(0.0) / sd;
        2.0 * (1.0 - super::estimate::t_cdf(z, 1e6))
    };
    p.min(1.0)
}

/// P(U = u) for u = 0..=m·n under the null, no ties: the number of
/// arrangements of m and n values with U = u, over C(m+n, m).
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // counts[i][j][u]: arrangements of i values of a and j of b.
    let mut prev: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1.0]);
        for j in 1..=n {
            let mut counts = vec![0.0; i * j + 1];
            // The largest value is a's: it adds nothing to U.
            for (u, c) in prev[j].iter().enumerate() {
                counts[u] += c;
            }
            // The largest value is b's: it is above all i of a's.
            for (u, c) in cur[j - 1].iter().enumerate() {
                counts[u + i] += c;
            }
            cur.push(counts);
        }
        prev = cur;
    }
    let total: f64 = prev[n].iter().sum();
    prev[n].iter().map(|c| c / total).collect()
}

/// One-sided p-value that `a` tends to be larger than `b` (normal
/// approximation with continuity correction, ties counted half).
pub fn greater(a: &[f64], b: &[f64]) -> f64 {
    let mut u = 0.0;
    for x in a {
        for y in b {
            u += if x > y {
                1.0
            } else if x == y {
                0.5
            } else {
                0.0
            };
        }
    }
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mean = n1 * n2 / 2.0;
    let sd = (n1 * n2 * (n1 + n2 + 1.0) / 12.0).sqrt();
    if sd == 0.0 {
        return 1.0;
    }
    let z = (u - mean - 0.5) / sd;
    1.0 - super::estimate::t_cdf(z, 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_rank_test_matches_its_tables() {
        // 3 against 3, completely separated: 2/20 arrangements are as extreme.
        let p = two_sided(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((p - 0.1).abs() < 1e-12, "{p}");
        // 5 against 5, separated: 2/252.
        let p = two_sided(&[1., 2., 3., 4., 5.], &[6., 7., 8., 9., 10.]);
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        // Interleaved: no evidence.
        let p = two_sided(&[1., 3., 5.], &[2., 4., 6.]);
        assert!(p > 0.6, "{p}");
        let dist = u_distribution(4, 3);
        assert!((dist.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(dist.len(), 13);
        // Large sides use the normal form.
        let a: Vec<f64> = (0..40).map(f64::from).collect();
        let b: Vec<f64> = (0..40).map(|i| f64::from(i) + 100.0).collect();
        assert!(two_sided(&a, &b) < 1e-6);
    }

    #[test]
    fn the_one_sided_test_is_small_only_when_one_side_is_larger() {
        let a: Vec<f64> = (0..20).map(|i| 10.0 + f64::from(i)).collect();
        let b: Vec<f64> = (0..20).map(f64::from).collect();
        assert!(greater(&a, &b) < 0.01);
        assert!(greater(&b, &a) > 0.99);
        assert!(greater(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]) > 0.3);
    }
}
