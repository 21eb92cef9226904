# tests/sh/pki.sh - sourced by the TLS tests: a throw-away PKI in the
# current directory, P-256 keys, certificates valid two days.
#   pki_ca NAME [CN]           NAME.key, NAME.pem: a self-signed CA
#   pki_signed NAME CN CA [EXT] NAME.key, NAME.pem: CN, signed by CA, with
#                               the extensions of file EXT (san.ext: a
#                               server's localhost and 127.0.0.1)
pki_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
pki_ca() {
  pki_key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=${2:-$1}" 2>/dev/null
}
pki_signed() {
  pki_key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial \
    -out "$1.pem" -days 2 ${4:+-extfile "$4"} 2>/dev/null
}
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
