#!/usr/bin/perl
# Checks the control API's OpenAPI document, and real requests and answers against it, with
# Perl's JSON::Validator (Debian's libjson-validator-perl; it validates the document against
# the OpenAPI 3.0 specification's own schema, which it carries).
#
#     perl check.pl OPENAPI.json EXCHANGES.json
#
# EXCHANGES is a list of {method, path (as the document spells it: /streams/{name}), name,
# status, content_type, body, request (a body sent, optional), request_valid (whether the
# document should accept the body: a valid body may still be refused, e.g. 409 for a name taken)}. Prints one line per problem; exits 1 if there is any.
use strict;
use warnings;
use JSON::Validator::Schema::OpenAPIv3;
use Mojo::File 'path';
use Mojo::JSON 'decode_json';

my $doc = decode_json(path($ARGV[0])->slurp);
my $schema = JSON::Validator::Schema::OpenAPIv3->new($doc);
my @problems = map {"the document: $_"} @{$schema->errors};

for my $x (@{decode_json(path($ARGV[1])->slurp)}) {
  my $what = "$x->{method} $x->{path} ($x->{status})";
  my $op = $doc->{paths}{$x->{path}}{lc $x->{method}};
  if (!$op) {
    # An operation the document does not have must be refused as one the path does not allow.
    push @problems, "$what: the document has no such operation" unless $x->{status} == 405;
    next;
  }
  if (!exists $op->{responses}{$x->{status}}) {
    push @problems, "$what: the status is not among the operation's documented responses";
    next;
  }
  my $body = $x->{body};
  (my $media = $x->{content_type}) =~ s/;.*//;
  my @e = $schema->validate_response([lc $x->{method}, $x->{path}, $x->{status}], {
    body => sub { return {exists => 1, value => $body, accept => $media} },
  });
  push @problems, map {"$what answer: $_"} @e;
  next unless exists $x->{request};
  my $sent = $x->{request};
  my @r = $schema->validate_request([lc $x->{method}, $x->{path}], {
    body => sub { return {exists => 1, value => $sent, content_type => 'application/json'} },
    path => {name => $x->{name} // ''},
  });
  if ($x->{request_valid} && @r) {
    push @problems, map {"$what request the server took: $_"} @r;
  } elsif (!$x->{request_valid} && !@r) {
    push @problems, "$what: the document accepts a request the server refused";
  }
}
print "$_\n" for @problems;
exit(@problems ? 1 : 0);
