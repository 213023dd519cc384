//! The checks a value must pass (a GTIN's check digit, an ISO 4217 code) and how a price reads.

use super::Price;

/// "4.99 EUR": the amount with the currency's minor digits (2 when unknown), or every digit it
/// needs when that would round it ("4.999 EUR").
pub fn price_text(price: &Price) -> String {
    let digits = iso_currency::Currency::from_code(&price.currency).and_then(|c| c.exponent()).unwrap_or(2);
    let fixed = format!("{:.*}", usize::from(digits), price.amount);
    let amount = if fixed.parse::<f64>().ok() == Some(price.amount) { fixed } else { price.amount.to_string() };
    format!("{amount} {}", price.currency).trim().to_string()
}

/// Checks a GTIN-8/12/13/14 (EAN, UPC): digits only, a valid length and the GS1 check digit.
pub fn check_gtin(gtin: &str) -> Result<(), String> {
    if gtin.is_empty() || !gtin.bytes().all(|b| b.is_ascii_digit()) {
        return Err("a GTIN has digits only".into());
    }
    if ![8, 12, 13, 14].contains(&gtin.len()) {
        return Err(format!("a GTIN has 8, 12, 13 or 14 digits, not {}", gtin.len()));
    }
    let digits: Vec<u32> = gtin.bytes().map(|b| u32::from(b - b'0')).collect();
    let (body, check) = digits.split_at(digits.len() - 1);
    // GS1: from the right, weights 3, 1, 3, ... over the body.
    let sum: u32 = body.iter().rev().enumerate().map(|(i, d)| if i % 2 == 0 { d * 3 } else { *d }).sum();
    let expected = (10 - sum % 10) % 10;
    if expected == check[0] {
        Ok(())
    } else {
        Err(format!("the check digit should be {expected}, not {}", check[0]))
    }
}

/// A GTIN in GS1's 14-digit form (left-padded with zeros), the key to compare GTINs by: a GTIN-12
/// `036000291452` and the GTIN-13 `0036000291452` are the same product. Meant for a GTIN that
/// passed [`check_gtin`]; anything else is returned as it is.
pub fn gtin_key(gtin: &str) -> String {
    if check_gtin(gtin).is_ok() {
        format!("{gtin:0>14}")
    } else {
        gtin.to_owned()
    }
}

/// Checks an ISO 4217 currency code.
pub fn check_currency(code: &str) -> Result<(), String> {
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("\"{code}\" is not a three-letter ISO 4217 code such as EUR"));
    }
    match iso_currency::Currency::from_code(code) {
        Some(_) => Ok(()),
        None => Err(format!("\"{code}\" is not an ISO 4217 currency")),
    }
}
