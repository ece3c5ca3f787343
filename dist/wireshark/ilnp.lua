-- ilnp.lua: ILNPv6 (RFC 6740-6744) for Wireshark / tshark 4.0 and later.
--
-- A post-dissector: after Wireshark has dissected a frame, it looks at the outermost
-- IPv6 header and, if the packet carries the RFC 6744 Nonce Destination Option (0x8B)
-- or is an ICMPv6 Locator Update (RFC 6743, type 156), adds an "ILNPv6" tree:
--
--   ilnp.nonce            bytes   the Nonce Value (4 or 12 octets)
--   ilnp.nonce.bits       uint8   32 or 96
--   ilnp.nonce.count      uint8   nonce options in the packet (more than 1: expert error)
--   ilnp.l64.src/.dst     uint64  upper 64 bits of the source/destination address (Locator)
--   ilnp.nid.src/.dst     uint64  lower 64 bits (Node Identifier)
--   ilnp.checksum         uint16  TCP/UDP checksum field of a packet with the nonce
--   ilnp.checksum.status  uint8   0 Bad, 1 Good, 2 Unverified, 3 Not present, 4 Illegal
--                                 (Wireshark's own checksum-status values), verified with
--                                 the RFC 6744 §3 rule: pseudo-header with both locators
--                                 zeroed (NIDs only)
--   ilnp.checksum.expected       the checksum the ILNP rule gives
--   ilnp.checksum.full_address   the checksum the plain IPv6 rule (RFC 8200 §8.1) would
--                                give: what tcp/udp.checksum_calculated shows as "should be"
--   ilnp.lu                      the Locator Update (subtree)
--   ilnp.lu.code, ilnp.lu.op (1 Advertisement, 2 Acknowledgement), ilnp.lu.num_locs,
--   ilnp.lu.reserved, ilnp.lu.entry (subtree per locator), ilnp.lu.locator (uint64),
--   ilnp.lu.pref (uint16), ilnp.lu.lifetime (uint16, seconds)
--
-- ICMPv6 (Locator Updates included) is checksummed over the full addresses (RFC 6741
-- §4.3, RFC 6743 §2): it gets no ilnp.checksum.status. Only if an ICMPv6 checksum is
-- wrong under that rule and right with the locators zeroed (what ilnp-public-1's send_lu
-- does) is an expert warning added.
--
-- Why a post-dissector: Wireshark 4.0's IPv6 dissector already owns the Destination
-- Options header (and shows the nonce as ipv6.opt.ilnp_nonce) and has no dissector
-- table for option types a Lua dissector could register in; registering for IP protocol
-- 60 would replace its whole Destination Options dissection. A post-dissector keeps all of
-- Wireshark's own decoding and reads the packet bytes itself; it locates the IPv6 header
-- with the `ipv6` field extractor (the only Wireshark field it relies on), so it works on
-- any link type (Ethernet, Linux cooked, raw IP). It needs no particular Lua version
-- (5.2 in Wireshark 4.0, 5.4 from 4.4): no bit32, no integer division, no string.unpack.
--
-- Wireshark >= 4.6 registers its own protocol "ilnp" (fields ilnp.nonce, ilnp.src_nid, ...);
-- there this script registers as "ilnp_lua" and all its fields are ilnp_lua.* (same suffixes).
-- Wireshark 4.6 (Debian sid) does not run Lua scripts as root (not even -X lua_script): run tshark as a
-- normal user on a capture file. Debian 12's 4.0 runs them as root too.
--
-- Install: copy this file to ~/.local/lib/wireshark/plugins/ (per user) or to
-- /usr/lib/x86_64-linux-gnu/wireshark/plugins/ (all users), or load it once with
-- `tshark -X lua_script:dist/wireshark/ilnp.lua`. See docs/wireshark.md.

local ilnp_info = {
    version = "1.0.0",
    description = "ILNPv6 (RFC 6740-6744): nonce option, Locator Update, ILNP transport checksum",
    repository = "ilnp: dist/wireshark/ilnp.lua",
}
if set_plugin_info then set_plugin_info(ilnp_info) end

local NONCE_OPT = 0x8B
local IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6 = 6, 17, 58
local ICMPV6_LU = 156

-- Wireshark >= 4.6 has its own "ilnp" protocol (and fields ilnp.nonce, ilnp.src_nid, ...):
-- a second protocol of that name cannot be registered, so there this script names itself
-- "ilnp_lua" and every field below is ilnp_lua.* instead of ilnp.*.
local P = "ilnp"
local ok_proto, p_ilnp = pcall(Proto, P, "ILNPv6 (RFC 6740-6744)")
if not ok_proto then
    P = "ilnp_lua"
    p_ilnp = Proto(P, "ILNPv6 (RFC 6740-6744, ilnp.lua)")
end

local op_names = { [1] = "Advertisement", [2] = "Acknowledgement" }
local status_names = { [0] = "Bad", [1] = "Good", [2] = "Unverified", [3] = "Not present", [4] = "Illegal" }
local ST_BAD, ST_GOOD, ST_UNVERIFIED, ST_ILLEGAL = 0, 1, 2, 4

local f = {
    nonce = ProtoField.bytes(P .. ".nonce", "Nonce"),
    nonce_bits = ProtoField.uint8(P .. ".nonce.bits", "Nonce size (bits)", base.DEC),
    nonce_count = ProtoField.uint8(P .. ".nonce.count", "Nonce options in the packet", base.DEC),
    l64_src = ProtoField.uint64(P .. ".l64.src", "Source Locator (L64)", base.HEX),
    nid_src = ProtoField.uint64(P .. ".nid.src", "Source Identifier (NID)", base.HEX),
    l64_dst = ProtoField.uint64(P .. ".l64.dst", "Destination Locator (L64)", base.HEX),
    nid_dst = ProtoField.uint64(P .. ".nid.dst", "Destination Identifier (NID)", base.HEX),
    cksum = ProtoField.uint16(P .. ".checksum", "ILNP transport checksum", base.HEX),
    cksum_status = ProtoField.uint8(P .. ".checksum.status", "ILNP checksum status", base.DEC, status_names),
    cksum_expected = ProtoField.uint16(P .. ".checksum.expected", "ILNP checksum (locators zeroed, RFC 6744 §3)", base.HEX),
    cksum_full = ProtoField.uint16(P .. ".checksum.full_address", "Checksum by the plain IPv6 rule (full addresses)", base.HEX),
    lu = ProtoField.none(P .. ".lu", "ICMPv6 Locator Update (RFC 6743)"),
    lu_code = ProtoField.uint8(P .. ".lu.code", "Code", base.DEC),
    lu_op = ProtoField.uint8(P .. ".lu.op", "Operation", base.DEC, op_names),
    lu_num = ProtoField.uint8(P .. ".lu.num_locs", "Num of Locs", base.DEC),
    lu_reserved = ProtoField.uint16(P .. ".lu.reserved", "Reserved", base.HEX),
    lu_entry = ProtoField.none(P .. ".lu.entry", "Locator entry"),
    lu_locator = ProtoField.uint64(P .. ".lu.locator", "Locator (L64)", base.HEX),
    lu_pref = ProtoField.uint16(P .. ".lu.pref", "Preference", base.DEC),
    lu_lifetime = ProtoField.uint16(P .. ".lu.lifetime", "Lifetime (s)", base.DEC),
}
p_ilnp.fields = {
    f.nonce, f.nonce_bits, f.nonce_count, f.l64_src, f.nid_src, f.l64_dst, f.nid_dst,
    f.cksum, f.cksum_status, f.cksum_expected, f.cksum_full,
    f.lu, f.lu_code, f.lu_op, f.lu_num, f.lu_reserved, f.lu_entry, f.lu_locator, f.lu_pref, f.lu_lifetime,
}

local e = {
    cksum_good = ProtoExpert.new(P .. ".checksum.good.expert", "ILNP transport checksum good",
        expert.group.CHECKSUM, expert.severity.CHAT),
    cksum_bad = ProtoExpert.new(P .. ".checksum.bad.expert", "ILNP transport checksum bad",
        expert.group.CHECKSUM, expert.severity.ERROR),
    cksum_unverified = ProtoExpert.new(P .. ".checksum.unverified.expert", "ILNP transport checksum not verified",
        expert.group.CHECKSUM, expert.severity.NOTE),
    cksum_udp_zero = ProtoExpert.new(P .. ".checksum.udp_zero.expert", "UDP checksum 0 is not allowed in IPv6 (RFC 8200 §8.1)",
        expert.group.CHECKSUM, expert.severity.WARN),
    icmp_zeroed = ProtoExpert.new(P .. ".icmp.zeroed_checksum.expert",
        "ICMPv6 checksum computed with the locators zeroed; RFC 6741 §4.3 / RFC 6743 §2 use the full addresses",
        expert.group.CHECKSUM, expert.severity.WARN),
    nonce_len = ProtoExpert.new(P .. ".nonce.bad_length.expert", "Nonce option length is neither 4 nor 12 octets",
        expert.group.MALFORMED, expert.severity.WARN),
    nonce_multi = ProtoExpert.new(P .. ".nonce.multiple.expert",
        "More than one Nonce option: RFC 6744 says discard as Authentication Failed",
        expert.group.SECURITY, expert.severity.ERROR),
    nonce_not_first = ProtoExpert.new(P .. ".nonce.not_first.expert",
        "Nonce is not the first option of its header (RFC 6744: SHOULD be first unless CALIPSO)",
        expert.group.PROTOCOL, expert.severity.NOTE),
    lu_no_nonce = ProtoExpert.new(P .. ".lu.no_nonce.expert",
        "Locator Update without a Nonce option: RFC 6743 §6 says discard as a forgery",
        expert.group.SECURITY, expert.severity.WARN),
    lu_zero = ProtoExpert.new(P .. ".lu.num_zero.expert", "Num of Locs is 0 (MUST NOT be, RFC 6743 §2)",
        expert.group.MALFORMED, expert.severity.ERROR),
    lu_len = ProtoExpert.new(P .. ".lu.length.expert", "Locator Update length is not 8 + 12 x Num of Locs",
        expert.group.MALFORMED, expert.severity.ERROR),
    lu_op = ProtoExpert.new(P .. ".lu.op_unknown.expert", "Unknown Operation (1 = Advertisement, 2 = Acknowledgement)",
        expert.group.PROTOCOL, expert.severity.WARN),
    lu_variant = ProtoExpert.new(P .. ".lu.code_variant.expert",
        "Code 1/2 with Operation 0: the rfc6743-lu-fd encoding (Code 1 = LU, 2 = ack), not RFC 6743 §2's",
        expert.group.PROTOCOL, expert.severity.NOTE),
}
p_ilnp.experts = {
    e.cksum_good, e.cksum_bad, e.cksum_unverified, e.cksum_udp_zero, e.icmp_zeroed, e.nonce_len, e.nonce_multi,
    e.nonce_not_first, e.lu_no_nonce, e.lu_zero, e.lu_len, e.lu_op, e.lu_variant,
}

local fx_ipv6 = Field.new("ipv6")

-- ---------------------------------------------------------------- helpers

-- one's-complement sum of a byte string (big-endian 16-bit words, odd byte padded)
local function sum_bytes(s, acc)
    local n, i = #s, 1
    while i < n do
        local a, b = s:byte(i, i + 1)
        acc = acc + a * 256 + b
        i = i + 2
    end
    if i == n then acc = acc + s:byte(i) * 256 end
    return acc
end

local function fold(acc)
    while acc > 0xFFFF do
        acc = (acc % 0x10000) + math.floor(acc / 0x10000)
    end
    return acc
end

-- "2001:0db8:000a:0000" (the L64/NID presentation form of RFC 6742)
local function groups(s)
    local out = {}
    for i = 1, 8, 2 do out[#out + 1] = string.format("%02x%02x", s:byte(i, i + 1)) end
    return table.concat(out, ":")
end

local function hex(s)
    return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- IPv6 extension headers with the generic (len + 1) * 8 length
local GENERIC_EXT = { [0] = true, [43] = true, [60] = true, [135] = true, [139] = true, [140] = true,
    [253] = true, [254] = true }

-- Walks the extension headers of the IPv6 packet at `ip` (offset into tvb). Returns
-- { nonces = { {off, len, first} ... }, proto, l4off, fragmented }
local function walk(tvb, ip)
    local caplen = tvb:len()
    local res = { nonces = {}, proto = nil, l4off = nil, fragmented = false }
    local nh = tvb(ip + 6, 1):uint()
    local off = ip + 40
    local hops = 0
    while hops < 16 do
        hops = hops + 1
        if nh == 44 then -- Fragment
            if off + 8 > caplen then return res end
            local fo = tvb(off + 2, 2):uint()
            if fo ~= 0 then -- offset != 0 or M set: no whole upper-layer packet here
                res.fragmented = true
                if math.floor(fo / 8) ~= 0 then return res end
            end
            nh = tvb(off, 1):uint()
            off = off + 8
        elseif nh == 51 then -- AH: (len + 2) * 4
            if off + 2 > caplen then return res end
            local len = (tvb(off + 1, 1):uint() + 2) * 4
            nh = tvb(off, 1):uint()
            off = off + len
        elseif GENERIC_EXT[nh] then
            if off + 2 > caplen then return res end
            local len = (tvb(off + 1, 1):uint() + 1) * 8
            if nh == 60 then
                local o, stop = off + 2, math.min(off + len, caplen)
                local first = true
                while o < stop do
                    local t = tvb(o, 1):uint()
                    if t == 0 then -- Pad1
                        o = o + 1
                    else
                        if o + 2 > stop then break end
                        local l = tvb(o + 1, 1):uint()
                        if t == NONCE_OPT then
                            res.nonces[#res.nonces + 1] = { off = o, len = l, first = first }
                        end
                        -- PadN or the filler (0x1E: ilnp_wire::destopts::OPT_FILLER) before it does not count
                        if t ~= 1 and t ~= 0x1E then first = false end
                        o = o + 2 + l
                    end
                end
            end
            nh = tvb(off, 1):uint()
            off = off + len
        else
            break
        end
    end
    res.proto, res.l4off = nh, off
    return res
end

-- ---------------------------------------------------------------- checksums

-- sum of the pseudo-header (RFC 8200 §8.1) over the raw 16-byte addresses `src`, `dst`;
-- with `zero_locators` their upper 64 bits count as zero (RFC 6744 §3)
local function pseudo_sum(src, dst, len, proto, zero_locators)
    local acc = 0
    if zero_locators then
        acc = sum_bytes(src:sub(9, 16), acc)
        acc = sum_bytes(dst:sub(9, 16), acc)
    else
        acc = sum_bytes(src, acc)
        acc = sum_bytes(dst, acc)
    end
    acc = acc + math.floor(len / 0x10000) + (len % 0x10000) + proto
    return acc
end

-- (ok, expected checksum) for an upper-layer segment `seg` whose checksum field is at `cpos`
-- (0-based); `udp`: a computed 0 is sent as 0xFFFF
local function check(src, dst, proto, seg, cpos, zero_locators, udp)
    local cur = seg:byte(cpos + 1) * 256 + seg:byte(cpos + 2)
    local acc = pseudo_sum(src, dst, #seg, proto, zero_locators)
    local all = fold(sum_bytes(seg, acc))
    -- the sum without the checksum field: remove `cur` in one's complement
    local without = fold(all + (0xFFFF - cur))
    local expected = 0xFFFF - without
    if udp and expected == 0 then expected = 0xFFFF end
    return all == 0xFFFF, expected
end

-- ---------------------------------------------------------------- dissection

local function dissect_lu(tvb, tree, pinfo, l4off, l4len, has_nonce)
    local lut = tree:add(f.lu, tvb(l4off, math.min(l4len, tvb:len() - l4off)))
    if l4len < 8 or l4off + 8 > tvb:len() then
        lut:add_proto_expert_info(e.lu_len)
        return
    end
    local code = tvb(l4off + 1, 1):uint()
    local num = tvb(l4off + 4, 1):uint()
    local op = tvb(l4off + 5, 1):uint()
    lut:add(f.lu_code, tvb(l4off + 1, 1))
    lut:add(f.lu_num, tvb(l4off + 4, 1))
    local opi = lut:add(f.lu_op, tvb(l4off + 5, 1))
    lut:add(f.lu_reserved, tvb(l4off + 6, 2))
    local opname = op_names[op]
    if not opname then
        if op == 0 and (code == 1 or code == 2) then
            opi:add_proto_expert_info(e.lu_variant)
            opname = (code == 1) and "Advertisement (Code 1)" or "Acknowledgement (Code 2)"
        else
            opi:add_proto_expert_info(e.lu_op)
            opname = "Operation " .. op
        end
    end
    if num == 0 then lut:add_proto_expert_info(e.lu_zero) end
    if l4len ~= 8 + 12 * num then lut:add_proto_expert_info(e.lu_len) end
    if not has_nonce then lut:add_proto_expert_info(e.lu_no_nonce) end
    local locs = {}
    for i = 0, num - 1 do
        local o = l4off + 8 + 12 * i
        if o + 12 > tvb:len() or 8 + 12 * (i + 1) > l4len then break end
        local loc = groups(tvb:raw(o, 8))
        local pref, life = tvb(o + 8, 2):uint(), tvb(o + 10, 2):uint()
        local et = lut:add(f.lu_entry, tvb(o, 12))
        et:set_text(string.format("Locator %d: %s, preference %d, lifetime %d s", i + 1, loc, pref, life))
        et:add(f.lu_locator, tvb(o, 8)):append_text(" (" .. loc .. ")")
        et:add(f.lu_pref, tvb(o + 8, 2))
        et:add(f.lu_lifetime, tvb(o + 10, 2))
        locs[#locs + 1] = loc
    end
    lut:append_text(string.format(": %s, %d locator%s", opname, num, num == 1 and "" or "s"))
    pinfo.cols.info:append(string.format(" [ILNPv6 LU %s: %s]", opname, table.concat(locs, ", ")))
end

function p_ilnp.dissector(tvb, pinfo, tree)
    local fi = fx_ipv6()
    if not fi then return end
    local ip = fi.offset
    local caplen = tvb:len()
    if ip + 40 > caplen or math.floor(tvb(ip, 1):uint() / 16) ~= 6 then return end
    local r = walk(tvb, ip)
    local icmp_lu = r.proto == IPPROTO_ICMPV6 and r.l4off and r.l4off < caplen
        and tvb(r.l4off, 1):uint() == ICMPV6_LU
    if #r.nonces == 0 and not icmp_lu then return end

    local t = tree:add(p_ilnp, tvb(ip, math.min(40, caplen - ip)))
    local src, dst = tvb:raw(ip + 8, 16), tvb:raw(ip + 24, 16)

    if #r.nonces > 0 then
        local n = r.nonces[1]
        local nlen = math.max(0, math.min(n.len, caplen - n.off - 2))
        local ni = t:add(f.nonce, tvb(n.off + 2, nlen))
        if n.len == 4 or n.len == 12 then
            t:add(f.nonce_bits, tvb(n.off + 1, 1), n.len * 8):set_generated()
        else
            ni:add_proto_expert_info(e.nonce_len)
        end
        if not n.first then ni:add_proto_expert_info(e.nonce_not_first) end
        local ci = t:add(f.nonce_count, #r.nonces):set_generated()
        if #r.nonces > 1 then ci:add_proto_expert_info(e.nonce_multi) end
        t:append_text(string.format(", nonce %s (%d bits)", hex(tvb:raw(n.off + 2, nlen)), n.len * 8))
        pinfo.cols.info:append(" [ILNPv6 nonce " .. hex(tvb:raw(n.off + 2, nlen)) .. "]")
    end
    t:add(f.l64_src, tvb(ip + 8, 8)):append_text(" (" .. groups(src:sub(1, 8)) .. ")")
    t:add(f.nid_src, tvb(ip + 16, 8)):append_text(" (" .. groups(src:sub(9, 16)) .. ")")
    t:add(f.l64_dst, tvb(ip + 24, 8)):append_text(" (" .. groups(dst:sub(1, 8)) .. ")")
    t:add(f.nid_dst, tvb(ip + 32, 8)):append_text(" (" .. groups(dst:sub(9, 16)) .. ")")

    local plen = tvb(ip + 4, 2):uint()
    local l4len = r.l4off and (ip + 40 + plen - r.l4off) or -1
    local whole = r.l4off and l4len >= 0 and r.l4off + l4len <= caplen and not r.fragmented

    if #r.nonces > 0 and (r.proto == IPPROTO_TCP or r.proto == IPPROTO_UDP) and r.l4off then
        local cpos = (r.proto == IPPROTO_TCP) and 16 or 6
        if r.l4off + cpos + 2 > caplen then return end
        local ck = t:add(f.cksum, tvb(r.l4off + cpos, 2))
        local cur = tvb(r.l4off + cpos, 2):uint()
        if not whole or l4len < cpos + 2 then
            ck:append_text(" [unverified: packet truncated or fragmented]")
            ck:add(f.cksum_status, ST_UNVERIFIED):set_generated()
            ck:add_proto_expert_info(e.cksum_unverified)
        elseif r.proto == IPPROTO_UDP and cur == 0 then
            ck:append_text(" [illegal: zero UDP checksum]")
            ck:add(f.cksum_status, ST_ILLEGAL):set_generated()
            ck:add_proto_expert_info(e.cksum_udp_zero)
        else
            local seg = tvb:raw(r.l4off, l4len)
            local udp = r.proto == IPPROTO_UDP
            local ok, expected = check(src, dst, r.proto, seg, cpos, true, udp)
            local _, full = check(src, dst, r.proto, seg, cpos, false, udp)
            ck:add(f.cksum_expected, expected):set_generated()
            ck:add(f.cksum_full, full):set_generated()
            ck:add(f.cksum_status, ok and ST_GOOD or ST_BAD):set_generated()
            if ok then
                ck:append_text(" [correct by the ILNP rule (RFC 6744 §3: locators zeroed)]")
                ck:add_proto_expert_info(e.cksum_good,
                    string.format("ILNP transport checksum good (locators zeroed); the plain IPv6 rule would want 0x%04x", full))
            else
                ck:append_text(string.format(" [incorrect, should be 0x%04x (locators zeroed)]", expected))
                ck:add_proto_expert_info(e.cksum_bad,
                    string.format("ILNP transport checksum bad: 0x%04x, should be 0x%04x (RFC 6744 §3: locators zeroed)", cur, expected))
            end
        end
    end

    if r.proto == IPPROTO_ICMPV6 and whole and l4len >= 4 then
        -- ICMPv6 uses full addresses; only a checksum made the zeroed way is flagged
        local seg = tvb:raw(r.l4off, l4len)
        local ok_full = check(src, dst, IPPROTO_ICMPV6, seg, 2, false, false)
        if not ok_full and check(src, dst, IPPROTO_ICMPV6, seg, 2, true, false) then
            t:add_proto_expert_info(e.icmp_zeroed)
        end
    end

    if icmp_lu then
        dissect_lu(tvb, t, pinfo, r.l4off, l4len >= 0 and l4len or (caplen - r.l4off), #r.nonces > 0)
    end
end

register_postdissector(p_ilnp)

-- The v4 path (docs/architecture.md § IPv4 and NAT): ILNPv6 packets as the payload of UDP
-- datagrams over IPv4, port 6740 unless ilnpd's [ipv4] port says otherwise (Decode As...
-- for another). The inner IPv6 packet is dissected as IPv6 and the postdissector above
-- reads it like any other.
local ipv6_dissector = Dissector.get("ipv6")
if ipv6_dissector then DissectorTable.get("udp.port"):add(6740, ipv6_dissector) end
