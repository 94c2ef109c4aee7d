package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"silt/compat/internal/compat"
)

// securityOpts are the client options of the driver's TLS and SASL flags.
func securityOpts(s compat.SecurityOptions) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.CA != "" {
		pem, err := os.ReadFile(s.CA)
		if err != nil {
			return nil, fmt.Errorf("tls-ca: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca: no certificate in %s", s.CA)
		}
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if s.Cert != "" {
			pair, err := tls.LoadX509KeyPair(s.Cert, s.Key)
			if err != nil {
				return nil, fmt.Errorf("tls-cert: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	switch s.Mechanism {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()))
	case "OAUTHBEARER":
		opts = append(opts, kgo.SASL(oauth.Auth{Token: s.Token}.AsMechanism()))
	default:
		return nil, fmt.Errorf("sasl-mechanism: %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "+
			"or OAUTHBEARER", s.Mechanism)
	}
	return opts, nil
}

// acls walks kadm's ACL calls on TOPIC for PRINCIPAL: creates an ALLOW of READ and WRITE on
// the topic (LITERAL) and a DENY of DELETE on the topics prefixed by its name (PREFIXED),
// describes what matches the topic (MATCH: both), deletes them, and describes again.
func acls(bootstrap string, args []string) (any, error) {
	topic, principal := args[0], args[1]
	adm, done, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()
	allow := kadm.NewACLs().Allow(principal).Topics(topic).
		Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	deny := kadm.NewACLs().Deny(principal).Topics(topic).
		Operations(kadm.OpDelete).ResourcePatternType(kadm.ACLPatternPrefixed)
	created := 0
	for _, b := range []*kadm.ACLBuilder{allow, deny} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("create acls: %w", err)
		}
		for _, r := range res {
			if r.Err != nil {
				return nil, withMessage(fmt.Errorf("create acl: %w", r.Err), r.ErrMessage)
			}
			created++
		}
	}
	filter := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(principal).AllowHosts().Deny(principal).DenyHosts().
			Topics(topic).Operations().ResourcePatternType(kadm.ACLPatternMatch)
	}
	describe := func() ([]string, error) {
		res, err := adm.DescribeACLs(ctx, filter())
		if err != nil {
			return nil, fmt.Errorf("describe acls: %w", err)
		}
		var seen []string
		for _, r := range res {
			if r.Err != nil {
				return nil, withMessage(fmt.Errorf("describe acls: %w", r.Err), r.ErrMessage)
			}
			for _, d := range r.Described {
				seen = append(seen, fmt.Sprintf("%s %s %s %s %s %s", d.Principal, d.Host,
					d.Name, d.Pattern, d.Operation, d.Permission))
			}
		}
		sort.Strings(seen)
		return seen, nil
	}
	before, err := describe()
	if err != nil {
		return nil, err
	}
	res, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow(principal).AllowHosts().
		Deny(principal).DenyHosts().Topics(topic).Operations().
		ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		return nil, fmt.Errorf("delete acls: %w", err)
	}
	deleted := 0
	for _, r := range res {
		if r.Err != nil {
			return nil, withMessage(fmt.Errorf("delete acls: %w", r.Err), r.ErrMessage)
		}
		deleted += len(r.Deleted)
	}
	after, err := describe()
	if err != nil {
		return nil, err
	}
	return map[string]any{"created": created, "described": before, "deleted": deleted,
		"after": len(after)}, nil
}
