//! SPDY/3 header blocks: name/value pairs with 32-bit lengths, compressed by one zlib stream
//! per direction of a connection, primed with the dictionary the SPDY/3 draft defines
//! (section 2.6.10.1). Each block ends with a sync flush, so the next continues the stream.

use std::sync::LazyLock;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::Error;

/// The most a header block may inflate to: port-forward's blocks hold three short headers.
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;

/// A block's headers in order, names in lower case; a value of several is one entry each.
pub type Headers = Vec<(String, String)>;

/// The first value of `name` in `headers`.
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// The words of the SPDY/3 dictionary that it stores with a 32-bit length before each.
const DICTIONARY_WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The rest of the SPDY/3 dictionary, stored as it is.
const DICTIONARY_TAIL: &str = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505\
    203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden\
    404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable\
    Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT\
    chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,\
    publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";

/// The SPDY/3 zlib dictionary, 1423 bytes.
pub static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut dictionary = Vec::with_capacity(1423);
    for word in DICTIONARY_WORDS {
        dictionary.extend_from_slice(&(word.len() as u32).to_be_bytes());
        dictionary.extend_from_slice(word.as_bytes());
    }
    dictionary.extend_from_slice(DICTIONARY_TAIL.as_bytes());
    dictionary
});

/// The Adler-32 of [`DICTIONARY`], which a zlib stream primed with it names in its header.
const DICTIONARY_ID: u32 = 0xe3c6_a7c2;

/// Writes header blocks: one per frame, all of a connection's direction in one zlib stream.
pub struct HeaderCompressor {
    zlib: Compress,
}

impl Default for HeaderCompressor {
    fn default() -> Self {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(&DICTIONARY).expect("a new zlib stream takes a dictionary");
        HeaderCompressor { zlib }
    }
}

impl HeaderCompressor {
    /// The compressed block of `headers`; names are written in lower case, as SPDY/3 wants.
    pub fn compress(&mut self, headers: &Headers) -> Vec<u8> {
        let mut plain = Vec::new();
        plain.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (name, value) in headers {
            for text in [name.to_ascii_lowercase().as_str(), value.as_str()] {
                plain.extend_from_slice(&(text.len() as u32).to_be_bytes());
                plain.extend_from_slice(text.as_bytes());
            }
        }
        let mut out = Vec::with_capacity(plain.len() + 64);
        let mut consumed = 0;
        loop {
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(64));
            }
            let before = self.zlib.total_in();
            self.zlib
                .compress_vec(&plain[consumed..], &mut out, FlushCompress::Sync)
                .expect("compressing into a buffer with room cannot fail");
            consumed += (self.zlib.total_in() - before) as usize;
            // A sync flush is complete once all input is in and the output did not fill up.
            if consumed == plain.len() && out.len() < out.capacity() {
                return out;
            }
        }
    }
}

/// Reads header blocks: the other direction's zlib stream, inflated with a bound.
pub struct HeaderDecompressor {
    zlib: Decompress,
}

impl Default for HeaderDecompressor {
    fn default() -> Self {
        HeaderDecompressor { zlib: Decompress::new(true) }
    }
}

impl HeaderDecompressor {
    /// The headers of one compressed block. Bad zlib, another dictionary, a block that
    /// inflates beyond [`MAX_HEADER_BLOCK`] or a malformed list is an error: the stream
    /// cannot be read on after it, so the connection ends.
    pub fn decompress(&mut self, block: &[u8]) -> Result<Headers, Error> {
        let plain = self.inflate(block)?;
        parse(&plain)
    }

    fn inflate(&mut self, block: &[u8]) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity((block.len() * 4).clamp(64, MAX_HEADER_BLOCK));
        let mut consumed = 0;
        loop {
            if out.len() > MAX_HEADER_BLOCK {
                return Err(Error::HeaderBlockTooLarge { limit: MAX_HEADER_BLOCK });
            }
            if out.len() == out.capacity() {
                // One byte past the limit tells a block that is too large from one that fits.
                out.reserve_exact((MAX_HEADER_BLOCK + 1 - out.len()).min(out.capacity()));
            }
            let (in_before, out_before) = (self.zlib.total_in(), out.len());
            let result = self.zlib.decompress_vec(&block[consumed..], &mut out, FlushDecompress::Sync);
            consumed += (self.zlib.total_in() - in_before) as usize;
            match result {
                Ok(Status::StreamEnd) => return Err(Error::Compression("the header zlib stream ended".into())),
                Ok(_) => {
                    if consumed == block.len() && out.len() < out.capacity() {
                        return Ok(out);
                    }
                    if self.zlib.total_in() == in_before && out.len() == out_before && out.len() < out.capacity() {
                        return Err(Error::Compression("the header block is truncated".into()));
                    }
                }
                Err(e) => match e.needs_dictionary() {
                    Some(DICTIONARY_ID) => {
                        self.zlib.set_dictionary(&DICTIONARY).map_err(|e| Error::Compression(e.to_string()))?;
                    }
                    Some(other) => {
                        return Err(Error::Compression(format!("the header block asks for dictionary {other:#010x}, not SPDY/3's")));
                    }
                    None => return Err(Error::Compression(e.to_string())),
                },
            }
        }
    }
}

/// The pairs of an inflated block, each value split at NUL into several.
fn parse(plain: &[u8]) -> Result<Headers, Error> {
    let mut rest = plain;
    let count = take_u32(&mut rest)? as usize;
    // Each pair takes at least eight bytes: a count beyond that is a lie, not an allocation.
    if count > rest.len() / 8 {
        return Err(Error::HeaderBlock(format!("it claims {count} headers in {} bytes", rest.len())));
    }
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let name = take_text(&mut rest)?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(Error::HeaderBlock(format!("header name {name:?} is empty or not lower case")));
        }
        let value = take_text(&mut rest)?;
        for part in value.split('\0') {
            headers.push((name.clone(), part.to_string()));
        }
    }
    if !rest.is_empty() {
        return Err(Error::HeaderBlock(format!("{} bytes follow the last header", rest.len())));
    }
    Ok(headers)
}

fn take_u32(rest: &mut &[u8]) -> Result<u32, Error> {
    let Some((head, tail)) = rest.split_first_chunk::<4>() else {
        return Err(Error::HeaderBlock("it ends inside a length".into()));
    };
    *rest = tail;
    Ok(u32::from_be_bytes(*head))
}

fn take_text(rest: &mut &[u8]) -> Result<String, Error> {
    let length = take_u32(rest)? as usize;
    if length > rest.len() {
        return Err(Error::HeaderBlock(format!("a text of {length} bytes in the {} left", rest.len())));
    }
    let (text, tail) = rest.split_at(length);
    *rest = tail;
    String::from_utf8(text.to_vec()).map_err(|_| Error::HeaderBlock("a header is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Headers {
        list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_dictionary_is_spdy3s() {
        assert_eq!(DICTIONARY.len(), 1423);
        let mut zlib = Compress::new(Compression::default(), true);
        assert_eq!(zlib.set_dictionary(&DICTIONARY).unwrap(), DICTIONARY_ID);
    }

    #[test]
    fn blocks_round_trip_in_one_stream_per_direction() {
        let (mut writer, mut reader) = (HeaderCompressor::default(), HeaderDecompressor::default());
        let first = pairs(&[("streamtype", "error"), ("port", "80"), ("requestid", "0")]);
        let second = pairs(&[("streamtype", "data"), ("port", "80"), ("requestid", "0")]);
        let block = writer.compress(&first);
        assert_eq!(&block[..2], &[0x78, 0xbb], "a zlib header that names a dictionary");
        assert_eq!(reader.decompress(&block).unwrap(), first);
        assert_eq!(reader.decompress(&writer.compress(&second)).unwrap(), second);
        assert_eq!(reader.decompress(&writer.compress(&Headers::new())).unwrap(), Headers::new());
    }

    #[test]
    fn names_go_out_in_lower_case_and_several_values_come_back_apart() {
        let (mut writer, mut reader) = (HeaderCompressor::default(), HeaderDecompressor::default());
        let block = writer.compress(&pairs(&[("StreamType", "data"), ("x", "a\0b")]));
        assert_eq!(reader.decompress(&block).unwrap(), pairs(&[("streamtype", "data"), ("x", "a"), ("x", "b")]));
    }

    #[test]
    fn bad_blocks_are_clear_errors() {
        let mut reader = HeaderDecompressor::default();
        assert!(matches!(reader.decompress(b"not zlib at all"), Err(Error::Compression(_))));

        let mut other = Compress::new(Compression::default(), true);
        other.set_dictionary(b"another dictionary").unwrap();
        let mut block = Vec::with_capacity(256);
        other.compress_vec(&[0, 0, 0, 0], &mut block, FlushCompress::Sync).unwrap();
        let error = HeaderDecompressor::default().decompress(&block).unwrap_err().to_string();
        assert!(error.contains("not SPDY/3's"), "{error}");

        let mut writer = HeaderCompressor::default();
        let huge = pairs(&[("big", &"x".repeat(MAX_HEADER_BLOCK))]);
        let error = HeaderDecompressor::default().decompress(&writer.compress(&huge)).err().expect("a block too large");
        assert!(matches!(error, Error::HeaderBlockTooLarge { .. }), "{error}");
    }

    #[test]
    fn malformed_lists_are_refused_without_allocating_what_they_claim() {
        assert!(parse(&[0xff, 0xff, 0xff, 0xff]).unwrap_err().to_string().contains("claims 4294967295 headers"));
        assert!(parse(&[0, 0, 0, 1, 0, 0, 0, 9, b'a', 0, 0, 0, 0]).is_err(), "a name longer than the block");
        assert!(parse(&[0, 0, 0, 1, 0, 0, 0, 1, b'A', 0, 0, 0, 0]).unwrap_err().to_string().contains("not lower case"));
        assert!(parse(&[0, 0, 0]).is_err());
        assert_eq!(parse(&[0, 0, 0, 1, 0, 0, 0, 1, b'a', 0, 0, 0, 1, b'b']).unwrap(), pairs(&[("a", "b")]));
    }
}
