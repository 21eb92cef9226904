/*
 * redis_config.c - a Redis store's options (sl_redis_options, its URL
 * included: redis[s]://, unix:, redis[s]-cluster://, redis[s]-sentinel://)
 * checked and copied,
 * and what the protocol core takes of them: the endpoint and the key
 * space.  No network I/O, so that it is the same for a store made with
 * lazy_connect (the daemon's) and tests/test_redis_proto.c can check it
 * without a server; TLS's files are read here, so that a bad one is
 * refused when the store is made.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "store/redis_store.h"

static char *dup_str(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

/* "unix:/path[?db=N]" (also "unix:///path"). */
static int parse_unix_url(sl__redis_config *cfg, const char *p, char *err,
                          size_t errlen, const char *url)
{
    const char *q = strchr(p, '?');
    size_t n = q ? (size_t)(q - p) : strlen(p);

    if (strncmp(p, "//", 2) == 0) {
        p += 2;
        n -= 2;
    }
    if (n == 0 || p[0] != '/') {
        sl__set_err(err, errlen,
                    "invalid redis url: socket path must be absolute: '%s'",
                    url);
        return SL_EINVAL;
    }
    if (q != NULL &&
        (strncmp(q, "?db=", 4) != 0 ||
         sl__parse_int(q + 4, strlen(q + 4), 0, 1 << 20, &cfg->db))) {
        sl__set_err(err, errlen,
                    "invalid redis url: bad query (only ?db=N): '%s'", url);
        return SL_EINVAL;
    }
    cfg->unix_path = strndup(p, n);
    return cfg->unix_path ? 0 : SL_ENOMEM;
}

/* "[[user]:password@]": sets user and password; returns what follows. */
static const char *parse_userinfo(sl__redis_config *cfg, const char *p,
                                  const char *end, int *err)
{
    const char *at = memchr(p, '@', (size_t)(end - p));
    *err = 0;
    if (at == NULL)
        return p;
    const char *c = memchr(p, ':', (size_t)(at - p));
    if (c != NULL) {
        if (c > p && (cfg->user = strndup(p, (size_t)(c - p))) == NULL)
            *err = SL_ENOMEM;
        else if ((cfg->password = strndup(c + 1, (size_t)(at - c - 1))) == NULL)
            *err = SL_ENOMEM;
    } else if (at > p && (cfg->user = strndup(p, (size_t)(at - p))) == NULL) {
        *err = SL_ENOMEM;
    }
    return at + 1;
}

/* "host[:port]" or "[ipv6][:port]" spanning [host, end): *out (NULL when
 * empty) and *port (left as it is when absent). */
static int parse_host_port(const char *host, const char *end, char **out,
                           int *port, char *err, size_t errlen, const char *url)
{
    const char *host_end, *colon;

    *out = NULL;
    if (*host == '[') { /* [ipv6]:port */
        const char *close = memchr(host, ']', (size_t)(end - host));
        if (close == NULL) {
            sl__set_err(err, errlen, "invalid redis url: unclosed '[': '%s'",
                        url);
            return SL_EINVAL;
        }
        *out = strndup(host + 1, (size_t)(close - host - 1));
        host_end = close + 1;
        colon = host_end < end && *host_end == ':' ? host_end : NULL;
    } else {
        colon = memchr(host, ':', (size_t)(end - host));
        host_end = colon ? colon : end;
        if (host_end > host)
            *out = strndup(host, (size_t)(host_end - host));
    }
    if (host_end > host && *out == NULL)
        return SL_ENOMEM;
    if ((colon == NULL && host_end != end) ||
        (colon != NULL &&
         sl__parse_int(colon + 1, (size_t)(end - colon - 1), 1, 65535, port))) {
        sl__set_err(err, errlen, "invalid redis url: bad port: '%s'", url);
        return SL_EINVAL;
    }
    return 0;
}

/* "redis://[[user]:password@]host[:port][/db]". */
static int parse_tcp_url(sl__redis_config *cfg, const char *p, char *err,
                         size_t errlen, const char *url)
{
    const char *end = p + strcspn(p, "/");
    int rc;
    const char *host = parse_userinfo(cfg, p, end, &rc);

    if (rc != 0 || (rc = parse_host_port(host, end, &cfg->host, &cfg->port, err,
                                         errlen, url)) != 0)
        return rc;
    if (*end == '/' && end[1] != '\0' &&
        sl__parse_int(end + 1, strlen(end + 1), 0, 1 << 20, &cfg->db)) {
        sl__set_err(err, errlen, "invalid redis url: bad db number: '%s'", url);
        return SL_EINVAL;
    }
    return 0;
}

/* "host:port[,host:port...]" spanning [p, end) into *hosts, *ports and
 * *n; a node without a port gets def_port (0: a port is required). */
static int parse_nodes(const char *p, const char *end, int def_port,
                       char ***hosts, int **ports, size_t *n, char *err,
                       size_t errlen, const char *url)
{
    size_t count = 1;
    int rc;
    for (const char *c = p; c < end; c++)
        count += *c == ',';
    if (count > SL__REDIS_MAX_NODES) {
        sl__set_err(err, errlen, "invalid redis url: more than %d nodes: '%s'",
                    SL__REDIS_MAX_NODES, url);
        return SL_EINVAL;
    }
    if ((*hosts = calloc(count, sizeof(char *))) == NULL ||
        (*ports = calloc(count, sizeof(int))) == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const char *node_end = memchr(p, ',', (size_t)(end - p));
        if (node_end == NULL)
            node_end = end;
        (*n)++;
        (*ports)[i] = def_port;
        if ((rc = parse_host_port(p, node_end, &(*hosts)[i], &(*ports)[i], err,
                                  errlen, url)) != 0)
            return rc;
        if ((*hosts)[i] == NULL || (*ports)[i] == 0) {
            sl__set_err(err, errlen,
                        "invalid redis url: each node needs host:port: '%s'",
                        url);
            return SL_EINVAL;
        }
        p = node_end + 1;
    }
    return 0;
}

/* "redis-cluster://[[user]:password@]host:port[,host:port...]": the
 * seed nodes, each with its port (a cluster has no default one).  No /db:
 * a cluster has only database 0. */
static int parse_cluster_url(sl__redis_config *cfg, const char *p, char *err,
                             size_t errlen, const char *url)
{
    const char *end = p + strlen(p);
    int rc;

    if (memchr(p, '/', (size_t)(end - p)) != NULL) {
        sl__set_err(err, errlen,
                    "invalid redis url: a cluster has no database number: '%s'",
                    url);
        return SL_EINVAL;
    }
    p = parse_userinfo(cfg, p, end, &rc);
    if (rc != 0 ||
        (rc = parse_nodes(p, end, 0, &cfg->seed_hosts, &cfg->seed_ports,
                          &cfg->n_seeds, err, errlen, url)) != 0)
        return rc;
    /* The first seed is also the endpoint a plain caller would use. */
    cfg->port = cfg->seed_ports[0];
    return (cfg->host = strdup(cfg->seed_hosts[0])) ? 0 : SL_ENOMEM;
}

/* "redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/name
 * [/db]": the Sentinels (port 26379 by default) that say where the
 * master called name is; the credentials and db are the master's. */
static int parse_sentinel_url(sl__redis_config *cfg, const char *p, char *err,
                              size_t errlen, const char *url)
{
    const char *end = p + strcspn(p, "/"), *name = end + 1, *name_end;
    int rc;

    if (*end != '/' || *name == '\0' || *name == '/') {
        sl__set_err(err, errlen,
                    "invalid redis url: a Sentinel URL names the master "
                    "after the nodes (redis-sentinel://host:port/mymaster): "
                    "'%s'",
                    url);
        return SL_EINVAL;
    }
    name_end = name + strcspn(name, "/");
    if (*name_end == '/' && name_end[1] != '\0' &&
        sl__parse_int(name_end + 1, strlen(name_end + 1), 0, 1 << 20,
                      &cfg->db)) {
        sl__set_err(err, errlen, "invalid redis url: bad db number: '%s'", url);
        return SL_EINVAL;
    }
    if ((cfg->master_name = strndup(name, (size_t)(name_end - name))) == NULL)
        return SL_ENOMEM;
    p = parse_userinfo(cfg, p, end, &rc);
    if (rc != 0)
        return rc;
    return parse_nodes(p, end, 26379, &cfg->sentinel_hosts,
                       &cfg->sentinel_ports, &cfg->n_sentinels, err, errlen,
                       url);
}

/* Sets *tls for the rediss schemes. */
static int parse_url(sl__redis_config *cfg, const char *url, int *tls,
                     char *err, size_t errlen)
{
    if (strncmp(url, "redis://", 8) == 0)
        return parse_tcp_url(cfg, url + 8, err, errlen, url);
    if (strncmp(url, "rediss://", 9) == 0)
        return *tls = 1, parse_tcp_url(cfg, url + 9, err, errlen, url);
    if (strncmp(url, "unix:", 5) == 0)
        return parse_unix_url(cfg, url + 5, err, errlen, url);
    if (strncmp(url, "redis-cluster://", 16) == 0)
        return parse_cluster_url(cfg, url + 16, err, errlen, url);
    if (strncmp(url, "rediss-cluster://", 17) == 0)
        return *tls = 1, parse_cluster_url(cfg, url + 17, err, errlen, url);
    if (strncmp(url, "redis-sentinel://", 17) == 0)
        return parse_sentinel_url(cfg, url + 17, err, errlen, url);
    if (strncmp(url, "rediss-sentinel://", 18) == 0)
        return *tls = 1, parse_sentinel_url(cfg, url + 18, err, errlen, url);
    sl__set_err(err, errlen,
                "invalid redis url: expected redis[s]://host:port[/db], "
                "unix:/path, redis[s]-cluster://host:port[,host:port...] or "
                "redis[s]-sentinel://host:port[,host:port...]/master: '%s'",
                url);
    return SL_EINVAL;
}

/* The TLS fields of o, with tls set by o or the URL. */
static int init_tls(sl__redis_config *cfg, const sl_redis_options *o, int tls,
                    char *err, size_t errlen)
{
    sl__tls_client_files f = {.label = "redis tls",
                              .ca_file = o->tls_ca_file,
                              .cert_file = o->tls_cert_file,
                              .key_file = o->tls_key_file,
                              .server_name = o->tls_server_name,
                              .insecure = o->tls_insecure != 0};
    if (!tls) {
        if (f.ca_file || f.cert_file || f.key_file || f.server_name ||
            f.insecure) {
            sl__set_err(err, errlen,
                        "redis tls options without TLS: use rediss:// "
                        "(or rediss-cluster://)");
            return SL_EINVAL;
        }
        return 0;
    }
    if (cfg->unix_path != NULL) {
        sl__set_err(err, errlen, "redis tls: not over a unix socket");
        return SL_EINVAL;
    }
    return sl__tls_client_new(&f, &cfg->tls, err, errlen);
}

int sl__redis_config_init(sl__redis_config *cfg, const sl_redis_options *o,
                          char *err, size_t errlen)
{
    const char *prefix = o->key_prefix ? o->key_prefix : "sl:";
    int rc, tls = o->tls != 0;

    cfg->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 1000;
    cfg->use_server_time = o->use_server_time != 0;
    cfg->extra_ttl_ms = o->extra_ttl_ms;
    cfg->max_key_len = o->max_key_len ? o->max_key_len : 4096;
    if (o->extra_ttl_ms < 0 || o->extra_ttl_ms > (INT64_C(1) << 40)) {
        sl__set_err(err, errlen, "extra_ttl_ms out of range: '%lld'",
                    (long long)o->extra_ttl_ms);
        return SL_EINVAL;
    }
    if (o->tag_delimiter == '{' || o->tag_delimiter == '}') {
        sl__set_err(err, errlen, "tag delimiter may not be '{' or '}'");
        return SL_EINVAL;
    }
    cfg->tag_delimiter = o->tag_delimiter;
    if (strpbrk(prefix, "{}") != NULL) {
        sl__set_err(
            err, errlen,
            "key prefix may not contain '{' or '}' (the hash tag): '%s'",
            prefix);
        return SL_EINVAL;
    }
    if ((cfg->prefix = strdup(prefix)) == NULL)
        return SL_ENOMEM;
    if (o->url != NULL) {
        if ((rc = parse_url(cfg, o->url, &tls, err, errlen)) != 0)
            return rc;
    } else {
        if (o->port < 0 || o->port > 65535 || o->db < 0) {
            sl__set_err(err, errlen, "port or db out of range: '%d', '%d'",
                        o->port, o->db);
            return SL_EINVAL;
        }
        cfg->port = o->port;
        cfg->db = o->db;
        if ((o->host && !(cfg->host = dup_str(o->host))) ||
            (o->unix_path && !(cfg->unix_path = dup_str(o->unix_path))) ||
            (o->user && !(cfg->user = dup_str(o->user))) ||
            (o->password && !(cfg->password = dup_str(o->password))))
            return SL_ENOMEM;
    }
    if ((o->sentinel_user || o->sentinel_password) && cfg->n_sentinels == 0) {
        sl__set_err(err, errlen,
                    "redis sentinel credentials without Sentinels: use "
                    "redis-sentinel://");
        return SL_EINVAL;
    }
    if ((o->sentinel_user &&
         !(cfg->sentinel_user = dup_str(o->sentinel_user))) ||
        (o->sentinel_password &&
         !(cfg->sentinel_password = dup_str(o->sentinel_password))))
        return SL_ENOMEM;
    /* A Sentinel's master has no address until one is asked. */
    if (cfg->host == NULL && cfg->unix_path == NULL && cfg->n_sentinels == 0 &&
        (cfg->host = strdup("127.0.0.1")) == NULL)
        return SL_ENOMEM;
    if (cfg->port == 0 && cfg->n_sentinels == 0)
        cfg->port = 6379;
    return init_tls(cfg, o, tls, err, errlen);
}

void sl__redis_config_release(sl__redis_config *cfg)
{
    for (size_t i = 0; i < cfg->n_seeds; i++)
        free(cfg->seed_hosts[i]);
    free(cfg->seed_hosts);
    free(cfg->seed_ports);
    for (size_t i = 0; i < cfg->n_sentinels; i++)
        free(cfg->sentinel_hosts[i]);
    free(cfg->sentinel_hosts);
    free(cfg->sentinel_ports);
    free(cfg->master_name);
    free(cfg->sentinel_user);
    free(cfg->sentinel_password);
    free(cfg->host);
    free(cfg->unix_path);
    free(cfg->user);
    free(cfg->password);
    free(cfg->prefix);
    sl__tls_client_free(cfg->tls);
}

void sl__redis_config_endpoint(const sl__redis_config *cfg,
                               sl__redis_endpoint *out)
{
    *out = (sl__redis_endpoint){cfg->host,
                                cfg->port,
                                cfg->unix_path,
                                cfg->db,
                                cfg->user,
                                cfg->password,
                                cfg->timeout_ms,
                                cfg->n_seeds,
                                (const char *const *)cfg->seed_hosts,
                                cfg->seed_ports,
                                cfg->tls,
                                cfg->n_sentinels,
                                (const char *const *)cfg->sentinel_hosts,
                                cfg->sentinel_ports,
                                cfg->master_name,
                                cfg->sentinel_user,
                                cfg->sentinel_password};
}

void sl__redis_config_keyspace(const sl__redis_config *cfg,
                               sl__redis_keyspace *out)
{
    *out = (sl__redis_keyspace){cfg->prefix,          cfg->tag_delimiter,
                                cfg->use_server_time, cfg->extra_ttl_ms,
                                cfg->n_seeds > 0,     cfg->max_key_len};
}
