//! Calendar arithmetic.

/// Whether `year` is a leap year in the Gregorian calendar.
pub fn is_leap(year: u32) -> bool {
    year % 4 == 0
}

/// The number of days in `month` (1-12) of `year`.
pub fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leap_years() {
        assert!(is_leap(2024));
        assert!(is_leap(2000));
        assert!(!is_leap(1900), "century years are leap only when divisible by 400");
        assert!(!is_leap(2023));
    }

    #[test]
    fn february() {
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(2100, 2), 28);
    }
}
