//! Kernel TLS: after the rustls handshake, the session keys go to the kernel
//! (`setsockopt(SOL_TCP, TCP_ULP, "tls")`, then `SOL_TLS`/`TLS_TX` and `TLS_RX` with a
//! `tls12_crypto_info_*` each), and the socket then carries plaintext for us: fetches keep
//! sendfile/splice, the kernel encrypts.
//!
//! Support is probed once at start-up on a loopback socket pair ([`probe`]): the ULP, each
//! cipher's TX, and RX with a record actually sent through both. A kernel without the `tls`
//! module answers the ULP with ENOENT ("unsupported"). Per connection, a failing `TCP_ULP` (or
//! a cipher the probe found unsupported) leaves the connection on user-space TLS; that choice
//! is made before the keys leave rustls, since extracting them consumes the rustls session.
//!
//! Records that are not application data (alerts, TLS 1.3 handshake messages such as a
//! KeyUpdate) make a plain `recv` fail with EIO; [`read_control_record`] then reads the record
//! with its type (`TLS_GET_RECORD_TYPE` cmsg). close_notify is sent as an alert record with a
//! `TLS_SET_RECORD_TYPE` cmsg ([`send_close_notify`]).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use rustls::{ConnectionTrafficSecrets, ProtocolVersion};

const SOL_TCP: libc::c_int = 6;
const TCP_ULP: libc::c_int = 31;
const SOL_TLS: libc::c_int = 282;
const TLS_TX: libc::c_int = 1;
const TLS_RX: libc::c_int = 2;
/// cmsg types of `SOL_TLS`.
const TLS_SET_RECORD_TYPE: libc::c_int = 1;
const TLS_GET_RECORD_TYPE: libc::c_int = 2;

const TLS_1_2_VERSION: u16 = 0x0303;
const TLS_1_3_VERSION: u16 = 0x0304;
const TLS_CIPHER_AES_GCM_128: u16 = 51;
const TLS_CIPHER_AES_GCM_256: u16 = 52;
const TLS_CIPHER_CHACHA20_POLY1305: u16 = 54;

/// TLS record content types.
pub const RECORD_ALERT: u8 = 21;
pub const RECORD_HANDSHAKE: u8 = 22;
pub const RECORD_APPLICATION_DATA: u8 = 23;

/// Largest TLS record body (2^14 plaintext plus expansion), the bound of a control record read.
const MAX_RECORD_BYTES: usize = 16 * 1024 + 256;

/// `struct tls_crypto_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CryptoInfoHeader {
    pub version: u16,
    pub cipher_type: u16,
}

/// `struct tls12_crypto_info_aes_gcm_128` (also used for TLS 1.3).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AesGcm128 {
    pub info: CryptoInfoHeader,
    pub iv: [u8; 8],
    pub key: [u8; 16],
    pub salt: [u8; 4],
    pub rec_seq: [u8; 8],
}

/// `struct tls12_crypto_info_aes_gcm_256`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AesGcm256 {
    pub info: CryptoInfoHeader,
    pub iv: [u8; 8],
    pub key: [u8; 32],
    pub salt: [u8; 4],
    pub rec_seq: [u8; 8],
}

/// `struct tls12_crypto_info_chacha20_poly1305` (its `salt[0]` takes no room).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Chacha20Poly1305 {
    pub info: CryptoInfoHeader,
    pub iv: [u8; 12],
    pub key: [u8; 32],
    pub rec_seq: [u8; 8],
}

/// One direction's keys in the kernel's layout.
#[derive(Clone, Copy, Debug)]
pub enum CryptoInfo {
    AesGcm128(AesGcm128),
    AesGcm256(AesGcm256),
    Chacha20Poly1305(Chacha20Poly1305),
}

/// The ciphers kernel TLS can take (those rustls' ring provider negotiates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelCipher {
    AesGcm128,
    AesGcm256,
    Chacha20Poly1305,
}

impl CryptoInfo {
    /// The kernel's view of rustls' secrets for one direction: `seq` is the next record's
    /// sequence number. AES-GCM's 12-byte IV is the kernel's 4-byte salt then 8-byte IV (for
    /// TLS 1.2, rustls' IV is already the implicit salt and the explicit nonce).
    pub fn new(
        version: ProtocolVersion,
        seq: u64,
        secrets: &ConnectionTrafficSecrets,
    ) -> Option<CryptoInfo> {
        let version = match version {
            ProtocolVersion::TLSv1_2 => TLS_1_2_VERSION,
            ProtocolVersion::TLSv1_3 => TLS_1_3_VERSION,
            _ => return None,
        };
        let (cipher, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (KernelCipher::AesGcm128, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (KernelCipher::AesGcm256, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (KernelCipher::Chacha20Poly1305, key, iv)
            }
            _ => return None,
        };
        CryptoInfo::from_parts(version, seq, cipher, key.as_ref(), iv.as_ref())
    }

    /// The layout for `cipher` from raw key and IV bytes (`version`: the kernel's TLS version
    /// number); `None` if their lengths do not fit the cipher.
    pub fn from_parts(
        version: u16,
        seq: u64,
        cipher: KernelCipher,
        key: &[u8],
        iv: &[u8],
    ) -> Option<CryptoInfo> {
        let rec_seq = seq.to_be_bytes();
        Some(match cipher {
            KernelCipher::AesGcm128 => CryptoInfo::AesGcm128(AesGcm128 {
                info: CryptoInfoHeader {
                    version,
                    cipher_type: TLS_CIPHER_AES_GCM_128,
                },
                iv: iv.get(4..12)?.try_into().ok()?,
                key: key.try_into().ok()?,
                salt: iv.get(..4)?.try_into().ok()?,
                rec_seq,
            }),
            KernelCipher::AesGcm256 => CryptoInfo::AesGcm256(AesGcm256 {
                info: CryptoInfoHeader {
                    version,
                    cipher_type: TLS_CIPHER_AES_GCM_256,
                },
                iv: iv.get(4..12)?.try_into().ok()?,
                key: key.try_into().ok()?,
                salt: iv.get(..4)?.try_into().ok()?,
                rec_seq,
            }),
            KernelCipher::Chacha20Poly1305 => CryptoInfo::Chacha20Poly1305(Chacha20Poly1305 {
                info: CryptoInfoHeader {
                    version,
                    cipher_type: TLS_CIPHER_CHACHA20_POLY1305,
                },
                iv: iv.try_into().ok()?,
                key: key.try_into().ok()?,
                rec_seq,
            }),
        })
    }

    pub fn cipher(&self) -> KernelCipher {
        match self {
            CryptoInfo::AesGcm128(_) => KernelCipher::AesGcm128,
            CryptoInfo::AesGcm256(_) => KernelCipher::AesGcm256,
            CryptoInfo::Chacha20Poly1305(_) => KernelCipher::Chacha20Poly1305,
        }
    }

    /// The struct's bytes, as `setsockopt` takes them.
    pub fn as_bytes(&self) -> &[u8] {
        fn bytes<T>(value: &T) -> &[u8] {
            // SAFETY: the structs are repr(C) of u16s and u8 arrays with no padding (their
            // sizes are checked in the tests against the kernel's), so every byte is
            // initialised; the slice borrows `value`.
            unsafe {
                std::slice::from_raw_parts((value as *const T).cast(), std::mem::size_of::<T>())
            }
        }
        match self {
            CryptoInfo::AesGcm128(info) => bytes(info),
            CryptoInfo::AesGcm256(info) => bytes(info),
            CryptoInfo::Chacha20Poly1305(info) => bytes(info),
        }
    }
}

/// Whether this kernel can take the keys, as found at start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KtlsSupport {
    /// The ULP attaches and at least one cipher works both ways.
    Supported { ciphers: Vec<KernelCipher> },
    /// Why not (e.g. the `tls` module is missing: TCP_ULP fails with ENOENT).
    Unsupported(String),
}

impl KtlsSupport {
    pub fn supports(&self, cipher: KernelCipher) -> bool {
        matches!(self, KtlsSupport::Supported { ciphers } if ciphers.contains(&cipher))
    }
}

/// Attaches the kernel's TLS upper-layer protocol to a connected TCP socket.
pub fn attach_ulp(fd: RawFd) -> io::Result<()> {
    setsockopt(fd, SOL_TCP, TCP_ULP, b"tls")
}

/// Hands one direction's keys to the kernel (after [`attach_ulp`]).
pub fn set_tx(fd: RawFd, info: &CryptoInfo) -> io::Result<()> {
    setsockopt(fd, SOL_TLS, TLS_TX, info.as_bytes())
}

pub fn set_rx(fd: RawFd, info: &CryptoInfo) -> io::Result<()> {
    setsockopt(fd, SOL_TLS, TLS_RX, info.as_bytes())
}

fn setsockopt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &[u8]) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, which outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value.as_ptr().cast(),
            value.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Describes a failed `TCP_ULP`: ENOENT means the kernel has no `tls` module.
pub fn describe_ulp_error(error: &io::Error) -> String {
    if error.raw_os_error() == Some(libc::ENOENT) {
        format!("the kernel has no TLS module (setsockopt TCP_ULP \"tls\": {error}; modprobe tls)")
    } else {
        format!("setsockopt TCP_ULP \"tls\" failed: {error}")
    }
}

/// Probes kernel TLS on loopback socket pairs: the ULP, then each cipher with TLS 1.3 keys on
/// both ends and one record sent through them.
pub fn probe() -> KtlsSupport {
    let mut ciphers = Vec::new();
    let mut last_error = String::new();
    for cipher in [
        KernelCipher::AesGcm128,
        KernelCipher::AesGcm256,
        KernelCipher::Chacha20Poly1305,
    ] {
        match probe_cipher(cipher) {
            Ok(()) => ciphers.push(cipher),
            Err(ProbeError::Ulp(reason)) => return KtlsSupport::Unsupported(reason),
            Err(ProbeError::Other(reason)) => last_error = format!("{cipher:?}: {reason}"),
        }
    }
    if ciphers.is_empty() {
        KtlsSupport::Unsupported(last_error)
    } else {
        KtlsSupport::Supported { ciphers }
    }
}

enum ProbeError {
    Ulp(String),
    Other(String),
}

fn probe_cipher(cipher: KernelCipher) -> Result<(), ProbeError> {
    use std::io::{Read, Write};
    let other = |what: &str, error: io::Error| ProbeError::Other(format!("{what}: {error}"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| other("bind", e))?;
    let addr = listener.local_addr().map_err(|e| other("local_addr", e))?;
    let mut client = std::net::TcpStream::connect(addr).map_err(|e| other("connect", e))?;
    let (mut server, _) = listener.accept().map_err(|e| other("accept", e))?;
    attach_ulp(client.as_raw_fd()).map_err(|e| ProbeError::Ulp(describe_ulp_error(&e)))?;
    attach_ulp(server.as_raw_fd()).map_err(|e| ProbeError::Ulp(describe_ulp_error(&e)))?;
    let info = probe_info(cipher);
    set_tx(client.as_raw_fd(), &info).map_err(|e| other("TLS_TX", e))?;
    set_rx(server.as_raw_fd(), &info).map_err(|e| other("TLS_RX", e))?;
    const PROBE: &[u8] = b"ktls probe";
    client.write_all(PROBE).map_err(|e| other("send", e))?;
    let _ = server.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    let mut got = [0u8; PROBE.len()];
    server
        .read_exact(&mut got)
        .map_err(|e| other("receive", e))?;
    if got != PROBE {
        return Err(ProbeError::Other(
            "a record did not decrypt to what was sent".into(),
        ));
    }
    Ok(())
}

/// Fixed keys for the probe (nothing secret travels).
fn probe_info(cipher: KernelCipher) -> CryptoInfo {
    let info = |cipher_type| CryptoInfoHeader {
        version: TLS_1_3_VERSION,
        cipher_type,
    };
    match cipher {
        KernelCipher::AesGcm128 => CryptoInfo::AesGcm128(AesGcm128 {
            info: info(TLS_CIPHER_AES_GCM_128),
            iv: [1; 8],
            key: [2; 16],
            salt: [3; 4],
            rec_seq: [0; 8],
        }),
        KernelCipher::AesGcm256 => CryptoInfo::AesGcm256(AesGcm256 {
            info: info(TLS_CIPHER_AES_GCM_256),
            iv: [1; 8],
            key: [2; 32],
            salt: [3; 4],
            rec_seq: [0; 8],
        }),
        KernelCipher::Chacha20Poly1305 => CryptoInfo::Chacha20Poly1305(Chacha20Poly1305 {
            info: info(TLS_CIPHER_CHACHA20_POLY1305),
            iv: [1; 12],
            key: [2; 32],
            rec_seq: [0; 8],
        }),
    }
}

/// Sends a close_notify alert on a kernel TLS socket (best effort, non-blocking).
pub fn send_close_notify(fd: RawFd) -> io::Result<()> {
    // Alert level warning (1), description close_notify (0).
    let alert = [1u8, 0u8];
    let record_type = [RECORD_ALERT];
    send_with_record_type(fd, &alert, &record_type)
}

fn send_with_record_type(fd: RawFd, payload: &[u8], record_type: &[u8; 1]) -> io::Result<()> {
    let mut control = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    // SAFETY: msghdr is plain data; all pointers set below point at locals that outlive the
    // sendmsg call; the cmsg written fits `control` (CMSG_SPACE(1) <= 24 bytes).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(1) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = SOL_TLS;
        (*cmsg).cmsg_type = TLS_SET_RECORD_TYPE;
        (*cmsg).cmsg_len = libc::CMSG_LEN(1) as usize;
        *libc::CMSG_DATA(cmsg) = record_type[0];
        if libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A record that is not application data, read after a plain `recv` on a kernel TLS socket
/// failed with EIO.
#[derive(Debug, PartialEq, Eq)]
pub enum ControlRecord {
    /// An alert: close_notify or a fatal alert, the peer is closing either way.
    Alert {
        level: u8,
        description: u8,
    },
    /// A TLS 1.3 handshake message (KeyUpdate, NewSessionTicket): the kernel cannot follow a
    /// rekey without the key schedule, which stayed in rustls.
    Handshake {
        message_type: u8,
    },
    /// Nothing readable now.
    WouldBlock,
    Other(u8),
}

/// Reads the pending non-data record with its type (non-blocking).
pub fn read_control_record(fd: RawFd) -> io::Result<ControlRecord> {
    let mut buffer = vec![0u8; MAX_RECORD_BYTES];
    let mut control = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: the pointers in msghdr point at locals that outlive recvmsg; the kernel writes
    // at most iov_len bytes into `buffer` and msg_controllen into `control`.
    let (read, record_type) = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let read = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT);
        if read < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::WouldBlock {
                return Ok(ControlRecord::WouldBlock);
            }
            return Err(error);
        }
        let mut record_type = RECORD_APPLICATION_DATA;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == SOL_TLS && (*cmsg).cmsg_type == TLS_GET_RECORD_TYPE {
                record_type = *libc::CMSG_DATA(cmsg);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        (read as usize, record_type)
    };
    let body = &buffer[..read];
    Ok(match record_type {
        RECORD_ALERT if body.len() >= 2 => ControlRecord::Alert {
            level: body[0],
            description: body[1],
        },
        RECORD_HANDSHAKE if !body.is_empty() => ControlRecord::Handshake {
            message_type: body[0],
        },
        other => ControlRecord::Other(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::cipher::{AeadKey, Iv};

    #[test]
    fn crypto_info_sizes_match_the_kernel() {
        // linux/tls.h: 4-byte header, then iv, key, salt, rec_seq.
        assert_eq!(std::mem::size_of::<AesGcm128>(), 4 + 8 + 16 + 4 + 8);
        assert_eq!(std::mem::size_of::<AesGcm256>(), 4 + 8 + 32 + 4 + 8);
        assert_eq!(std::mem::size_of::<Chacha20Poly1305>(), 4 + 12 + 32 + 8);
    }

    #[test]
    fn crypto_info_layout_from_rustls_secrets() {
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let iv: [u8; 12] = std::array::from_fn(|i| 100 + i as u8);
        // (rustls makes 16-byte AeadKeys only inside the crate: the raw parts here.)
        let info = CryptoInfo::from_parts(
            TLS_1_3_VERSION,
            0x0102_0304_0506_0708,
            KernelCipher::AesGcm128,
            &key,
            &iv,
        )
        .unwrap();
        assert!(
            CryptoInfo::from_parts(TLS_1_3_VERSION, 0, KernelCipher::AesGcm128, &[0; 32], &iv)
                .is_none()
        );
        let bytes = info.as_bytes();
        assert_eq!(bytes.len(), 40);
        assert_eq!(&bytes[..2], &0x0304u16.to_ne_bytes());
        assert_eq!(&bytes[2..4], &51u16.to_ne_bytes());
        assert_eq!(&bytes[4..12], &iv[4..]);
        assert_eq!(&bytes[12..28], &key);
        assert_eq!(&bytes[28..32], &iv[..4]);
        assert_eq!(&bytes[32..40], &[1, 2, 3, 4, 5, 6, 7, 8]);

        let key32: [u8; 32] = std::array::from_fn(|i| 50 + i as u8);
        let secrets = ConnectionTrafficSecrets::Chacha20Poly1305 {
            key: AeadKey::from(key32),
            iv: Iv::new(iv),
        };
        let info = CryptoInfo::new(ProtocolVersion::TLSv1_2, 9, &secrets).unwrap();
        let bytes = info.as_bytes();
        assert_eq!(bytes.len(), 56);
        assert_eq!(&bytes[..2], &0x0303u16.to_ne_bytes());
        assert_eq!(&bytes[2..4], &54u16.to_ne_bytes());
        assert_eq!(&bytes[4..16], &iv);
        assert_eq!(&bytes[16..48], &key32);
        assert_eq!(&bytes[48..56], &9u64.to_be_bytes());

        let secrets = ConnectionTrafficSecrets::Aes256Gcm {
            key: AeadKey::from(key32),
            iv: Iv::new(iv),
        };
        let info = CryptoInfo::new(ProtocolVersion::TLSv1_3, 0, &secrets).unwrap();
        assert_eq!(info.cipher(), KernelCipher::AesGcm256);
        assert_eq!(info.as_bytes().len(), 56);
        assert_eq!(&info.as_bytes()[44..48], &iv[..4]);
    }

    /// On this kernel: whatever the answer, it is one of the two, and a kernel without the
    /// module says so (ENOENT). Where the kernel has kTLS, a record goes through it.
    #[test]
    fn probe_reports_this_kernel() {
        match probe() {
            KtlsSupport::Supported { ciphers } => {
                eprintln!("kernel TLS supported here: {ciphers:?}");
                assert!(ciphers.contains(&KernelCipher::AesGcm128));
            }
            KtlsSupport::Unsupported(reason) => {
                eprintln!("kernel TLS unsupported here: {reason}");
                assert!(!reason.is_empty());
            }
        }
    }
}
