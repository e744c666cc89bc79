/* The f64 forward for x <= 0, correctly rounded: the double nearest
 * neg * expm1(t), t = x * nip exact, ties to even. Shared text, as
 * elu_forward_f32.h: src/scalar.c and src/cpu_fast.c include this file
 * (C), and src/jit.c puts it after elu_dd.h before kernels_src/elu.cu
 * (CUDA C++). docs/DESIGN.md (The correctly rounded f64 forward) derives
 * the bounds.
 *
 * t = th + tl exactly (an FMA), clamped to [T_MIN, 0] (below, the result
 * rounds to -neg as at T_MIN). Where |th| >= TINY:
 *
 * Fast, in double-double: t = k ln2/128 + r, |r| <= ln2/256, and
 *
 *   e^t - 1 = A p + (A - 1),  A = 2^(k/128) = 2^m T[j] (T as hi + lo),
 *   p = expm1(r) = r + r^2/2 + r^3 q(r), q Taylor's of degree 4,
 *   y = neg (A p + (A - 1)) = yh + yl
 *
 * within FAST_ERR of the exact value, relatively. The result is yh + yl
 * rounded when y - FAST_ERR |y| and y + FAST_ERR |y| round alike (Ziv's
 * test, which about one input in 2^15 fails); else that of the slow
 * path, the same steps in triple-double, within 2^-150 relatively. Doubt
 * can only remain for an exact value within 2^-150 of a midpoint but for
 * a midpoint product neg * t at |t| below 2^-149, which lies |t|/2 or so
 * from its exact value: there k = 0, r is t itself, and the slow path's
 * error is 2^-150 of the terms beyond neg * t, which it carries exactly.
 *
 * Tiny, |th| < TINY: e^t - 1 = t (1 + t/2 + ...) lies within 2^-170 of t,
 * on zero's side. The product neg * x * nip, exact as an integer product
 * of the three significands, rounded to nearest with ties toward zero, is
 * then the result (a product of three doubles that is not a midpoint lies
 * 2^-160 or more from one, relatively).
 *
 * neg and nip must lie within [2^-500, 2^500] (numerics.c checks it): no
 * product then leaves the normal range but in the tiny case. */
#ifndef ELU_FORWARD_F64_H
#define ELU_FORWARD_F64_H

#ifndef __CUDACC__
#include "elu_dd.h" /* src/jit.c puts it before this file for CUDA */
#endif

#define ELU_F64_T_MIN (-40.0)              /* e^t < 2^-57: -neg, rounded */
#define ELU_F64_TINY 0x1p-170              /* |t| below: neg * t, see above */
#define ELU_F64_INV_L 0x1.71547652b82fep+7 /* 128/ln2 */
#define ELU_F64_ROUND 0x1.8p52             /* v + ROUND holds round(v) */
#define ELU_F64_FAST_ERR 0x1p-69           /* the fast path's bound, relative */
/* ln2/128 in four parts: L1 has 40 bits, so that k*L1 and t - k*L1 are
 * exact for |k| < 2^13. */
#define ELU_F64_L1 0x1.62e42fefa2000p-8
#define ELU_F64_L2 0x1.9ef35793c7673p-48
#define ELU_F64_L3 0x1.f97b57a079a19p-110
#define ELU_F64_L4 0x1.9ca62d8b62834p-165

/* The fast path's constants (ELU_CONSTANTS): 128/ln2, ln2/128's first two
 * parts, and 1/n! for n from 7 down to 3. */
struct elu_f64_fast_constants {
    double inv_l, l1, l2, c7, c6, c5, c4, c3;
};
ELU_CONSTANTS struct elu_f64_fast_constants elu_f64_k = {
    ELU_F64_INV_L, ELU_F64_L1, ELU_F64_L2, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6};

/* 2^(j/128) for j in [0, 128) in three parts, each the rest rounded: the
 * fast path reads two. */
ELU_TABLE double elu_f64_exp2_128[3][128] = {
    {
     0x1.0000000000000p+0, 0x1.0163da9fb3335p+0, 0x1.02c9a3e778061p+0, 0x1.04315e86e7f85p+0,
     0x1.059b0d3158574p+0, 0x1.0706b29ddf6dep+0, 0x1.0874518759bc8p+0, 0x1.09e3ecac6f383p+0,
     0x1.0b5586cf9890fp+0, 0x1.0cc922b7247f7p+0, 0x1.0e3ec32d3d1a2p+0, 0x1.0fb66affed31bp+0,
     0x1.11301d0125b51p+0, 0x1.12abdc06c31ccp+0, 0x1.1429aaea92de0p+0, 0x1.15a98c8a58e51p+0,
     0x1.172b83c7d517bp+0, 0x1.18af9388c8deap+0, 0x1.1a35beb6fcb75p+0, 0x1.1bbe084045cd4p+0,
     0x1.1d4873168b9aap+0, 0x1.1ed5022fcd91dp+0, 0x1.2063b88628cd6p+0, 0x1.21f49917ddc96p+0,
     0x1.2387a6e756238p+0, 0x1.251ce4fb2a63fp+0, 0x1.26b4565e27cddp+0, 0x1.284dfe1f56381p+0,
     0x1.29e9df51fdee1p+0, 0x1.2b87fd0dad990p+0, 0x1.2d285a6e4030bp+0, 0x1.2ecafa93e2f56p+0,
     0x1.306fe0a31b715p+0, 0x1.32170fc4cd831p+0, 0x1.33c08b26416ffp+0, 0x1.356c55f929ff1p+0,
     0x1.371a7373aa9cbp+0, 0x1.38cae6d05d866p+0, 0x1.3a7db34e59ff7p+0, 0x1.3c32dc313a8e5p+0,
     0x1.3dea64c123422p+0, 0x1.3fa4504ac801cp+0, 0x1.4160a21f72e2ap+0, 0x1.431f5d950a897p+0,
     0x1.44e086061892dp+0, 0x1.46a41ed1d0057p+0, 0x1.486a2b5c13cd0p+0, 0x1.4a32af0d7d3dep+0,
     0x1.4bfdad5362a27p+0, 0x1.4dcb299fddd0dp+0, 0x1.4f9b2769d2ca7p+0, 0x1.516daa2cf6642p+0,
     0x1.5342b569d4f82p+0, 0x1.551a4ca5d920fp+0, 0x1.56f4736b527dap+0, 0x1.58d12d497c7fdp+0,
     0x1.5ab07dd485429p+0, 0x1.5c9268a5946b7p+0, 0x1.5e76f15ad2148p+0, 0x1.605e1b976dc09p+0,
     0x1.6247eb03a5585p+0, 0x1.6434634ccc320p+0, 0x1.6623882552225p+0, 0x1.68155d44ca973p+0,
     0x1.6a09e667f3bcdp+0, 0x1.6c012750bdabfp+0, 0x1.6dfb23c651a2fp+0, 0x1.6ff7df9519484p+0,
     0x1.71f75e8ec5f74p+0, 0x1.73f9a48a58174p+0, 0x1.75feb564267c9p+0, 0x1.780694fde5d3fp+0,
     0x1.7a11473eb0187p+0, 0x1.7c1ed0130c132p+0, 0x1.7e2f336cf4e62p+0, 0x1.80427543e1a12p+0,
     0x1.82589994cce13p+0, 0x1.8471a4623c7adp+0, 0x1.868d99b4492edp+0, 0x1.88ac7d98a6699p+0,
     0x1.8ace5422aa0dbp+0, 0x1.8cf3216b5448cp+0, 0x1.8f1ae99157736p+0, 0x1.9145b0b91ffc6p+0,
     0x1.93737b0cdc5e5p+0, 0x1.95a44cbc8520fp+0, 0x1.97d829fde4e50p+0, 0x1.9a0f170ca07bap+0,
     0x1.9c49182a3f090p+0, 0x1.9e86319e32323p+0, 0x1.a0c667b5de565p+0, 0x1.a309bec4a2d33p+0,
     0x1.a5503b23e255dp+0, 0x1.a799e1330b358p+0, 0x1.a9e6b5579fdbfp+0, 0x1.ac36bbfd3f37ap+0,
     0x1.ae89f995ad3adp+0, 0x1.b0e07298db666p+0, 0x1.b33a2b84f15fbp+0, 0x1.b59728de5593ap+0,
     0x1.b7f76f2fb5e47p+0, 0x1.ba5b030a1064ap+0, 0x1.bcc1e904bc1d2p+0, 0x1.bf2c25bd71e09p+0,
     0x1.c199bdd85529cp+0, 0x1.c40ab5fffd07ap+0, 0x1.c67f12e57d14bp+0, 0x1.c8f6d9406e7b5p+0,
     0x1.cb720dcef9069p+0, 0x1.cdf0b555dc3fap+0, 0x1.d072d4a07897cp+0, 0x1.d2f87080d89f2p+0,
     0x1.d5818dcfba487p+0, 0x1.d80e316c98398p+0, 0x1.da9e603db3285p+0, 0x1.dd321f301b460p+0,
     0x1.dfc97337b9b5fp+0, 0x1.e264614f5a129p+0, 0x1.e502ee78b3ff6p+0, 0x1.e7a51fbc74c83p+0,
     0x1.ea4afa2a490dap+0, 0x1.ecf482d8e67f1p+0, 0x1.efa1bee615a27p+0, 0x1.f252b376bba97p+0,
     0x1.f50765b6e4540p+0, 0x1.f7bfdad9cbe14p+0, 0x1.fa7c1819e90d8p+0, 0x1.fd3c22b8f71f1p+0},
    {
     0x0.0p+0, 0x1.b61299ab8cdb7p-54, -0x1.19083535b085dp-56, -0x1.0a31c1977c96ep-54,
     0x1.d73e2a475b465p-55, -0x1.c91dfe2b13c27p-55, 0x1.186be4bb284ffp-57, 0x1.1487818316136p-54,
     0x1.8a62e4adc610bp-54, 0x1.01edc16e24f71p-54, 0x1.03a1727c57b53p-59, -0x1.b9bedc44ebd7bp-57,
     -0x1.6c51039449b3ap-54, -0x1.1b514b36ca5c7p-58, -0x1.32fbf9af1369ep-54, 0x1.2406ab9eeab0ap-55,
     -0x1.19041b9d78a76p-55, -0x1.11023d1970f6cp-54, 0x1.e5b4c7b4968e4p-55, -0x1.95386352ef607p-54,
     0x1.e016e00a2643cp-54, -0x1.1df98027bb78cp-54, 0x1.dc775814a8495p-55, 0x1.2a97e9494a5eep-55,
     0x1.9b07eb6c70573p-54, 0x1.ac155bef4f4a4p-55, 0x1.2bd339940e9d9p-55, -0x1.a4c3a8c3f0d7ep-54,
     0x1.612e8afad1255p-55, -0x1.10adcd6381aa4p-59, 0x1.0024754db41d5p-54, 0x1.1ca0f45d52383p-56,
     0x1.6f46ad23182e4p-55, 0x1.a9ce78e18047cp-55, 0x1.32721843659a6p-54, -0x1.b5cee5c4e4628p-55,
     -0x1.63aeabf42eae2p-54, -0x1.e958d3c9904bdp-54, -0x1.5e436d661f5e3p-56, -0x1.efff8375d29c3p-54,
     0x1.ada0911f09ebcp-55, -0x1.7d023f956f9f3p-54, -0x1.ef3691c309278p-58, -0x1.1c7dde35f7999p-55,
     0x1.89b7a04ef80d0p-59, 0x1.c944bd1648a76p-54, 0x1.3c1a3b69062f0p-56, 0x1.9cb62f3d1be56p-54,
     0x1.d4397afec42e2p-56, 0x1.8ecdbbc6a7833p-54, -0x1.4b309d25957e3p-54, -0x1.f768569bd93efp-55,
     -0x1.07abe1db13cadp-55, -0x1.d689cefede59bp-55, 0x1.9bb2c011d93adp-54, 0x1.295e15b9a1de8p-55,
     0x1.6324c054647adp-54, 0x1.c4b1b816986a2p-60, 0x1.ba6f93080e65ep-54, -0x1.3e2429b56de47p-54,
     -0x1.383c17e40b497p-54, -0x1.c483c759d8933p-55, -0x1.bb60987591c34p-54, 0x1.038ae44f73e65p-57,
     -0x1.bdd3413b26456p-54, -0x1.2895667ff0b0dp-56, -0x1.bbe3a683c88abp-57, -0x1.83c0f25860ef6p-55,
     -0x1.16e4786887a99p-55, -0x1.0a8d96c65d53cp-54, -0x1.0245957316dd3p-54, 0x1.866b80a02162dp-54,
     -0x1.41577ee04992fp-55, 0x1.f124cd1164dd6p-54, 0x1.05d02ba15797ep-56, -0x1.27c86626d972bp-54,
     -0x1.d4c1dd41532d8p-54, -0x1.8d684a341cdfbp-55, -0x1.fc6f89bd4f6bap-54, 0x1.994c2f37cb53ap-54,
     0x1.6e9f156864b27p-54, -0x1.0d55e32e9e3aap-56, 0x1.5cc13a2e3976cp-55, -0x1.dd6792e582524p-54,
     -0x1.75fc781b57ebcp-57, -0x1.64b7c96a5f039p-56, -0x1.d185b7c1b85d1p-54, -0x1.173bd91cee632p-54,
     0x1.c7c46b071f2bep-56, 0x1.824ca78e64c6ep-56, -0x1.359495d1cd533p-54, 0x1.6305c7ddc36abp-54,
     -0x1.d2f6edb8d41e1p-54, 0x1.bcb7ecac563c7p-54, 0x1.0fac90ef7fd31p-54, -0x1.f9234cae76cd0p-55,
     0x1.7a1cd345dcc81p-54, -0x1.bdef54c80e425p-54, -0x1.2805e3084d708p-57, -0x1.c71dfbbba6de3p-54,
     -0x1.5584f7e54ac3bp-56, -0x1.efcd30e54292ep-54, 0x1.23dd07a2d9e84p-55, -0x1.efdca3f6b9c73p-54,
     0x1.11065895048ddp-55, 0x1.b4537e083c60ap-54, 0x1.2884dff483cadp-54, 0x1.1acbc48805c44p-56,
     0x1.503cbd1e949dbp-56, -0x1.dd83b53829d72p-55, -0x1.cbc3743797a9cp-54, -0x1.d487b719d8578p-54,
     0x1.2ed02d75b3707p-55, -0x1.11ec18beddfe8p-54, 0x1.c2300696db532p-54, 0x1.2da5778f018c3p-54,
     -0x1.1a5cd4f184b5cp-54, -0x1.7b627817a1496p-54, 0x1.39e8980a9cc8fp-55, 0x1.2d522ca0c8de2p-54,
     -0x1.e9c23179c2893p-54, -0x1.c93f3b411ad8cp-54, 0x1.dc7f486a4b6b0p-54, 0x1.3a1a5bf0d8e43p-54,
     0x1.9d3e12dd8a18bp-54, -0x1.dbb12d006350ap-54, 0x1.74853f3a5931ep-55, 0x1.2eb74966579e7p-57},
    {
     0x0.0p+0, 0x1.bf48007d80987p-109, -0x1.9085b0a3d74d5p-110, -0x1.912fbf44b4040p-112,
     0x1.05ff94f8d257ep-110, 0x1.fb41f2e2c24abp-110, 0x1.15820d96b414fp-111, -0x1.48b45d1fdc259p-108,
     -0x1.67c9bd6ebf74cp-108, 0x1.e8aac564e6fe3p-108, -0x1.5aa76994e9ddbp-113, -0x1.aeb1f49d84259p-112,
     0x1.9d58b988f562dp-109, -0x1.08d8f42083120p-112, -0x1.2fe7bb4c76416p-108, -0x1.01b575279c474p-110,
     0x1.4f2406aa13ff0p-109, 0x1.725f0040b97c5p-110, 0x1.ad36183926ae8p-111, -0x1.40ca69503718ep-109,
     0x1.ea62d0881b918p-110, 0x1.e504d36c47475p-108, -0x1.781dbc16f1ea4p-111, -0x1.693c2b3b7106bp-109,
     -0x1.4d89f9af532e0p-109, 0x1.1a9c8afdcf797p-112, 0x1.277393a461b77p-110, 0x1.67fdaa2e52d7dp-108,
     0x1.de54485604690p-111, 0x1.0885fb8796dbdp-113, -0x1.ee9d8f8cb9307p-110, 0x1.d7b08dee6d12ap-111,
     0x1.7b7b2f09cd0d9p-110, 0x1.b778c882b85e8p-110, -0x1.406a2ea6cfc6bp-108, -0x1.8e524e520d5f2p-109,
     0x1.87e3e12516bfap-108, 0x1.0a77a61404f21p-109, 0x1.9b0b1ff17c296p-111, -0x1.1143f2a93395ap-109,
     -0x1.808ba68fa8fb7p-109, -0x1.0473e3724200dp-108, -0x1.32b43eafc6518p-114, 0x1.903c496195fefp-109,
     -0x1.0ac312de3d922p-114, 0x1.7df404ff21f3ap-108, 0x1.e1eebae743ac0p-111, 0x1.91876c761e2c7p-110,
     0x1.c06c7745c2b39p-113, 0x1.212c969559b43p-110, -0x1.1aa1fd7b685cdp-112, 0x1.90e718226177dp-112,
     0x1.fa733951f214cp-111, 0x1.9c991771b0493p-110, -0x1.ff86852a613ffp-111, -0x1.a26d92ad1e4c6p-109,
     -0x1.744ee506fdafep-109, 0x1.ec2735254978cp-119, -0x1.95f9ab75fa7d6p-108, -0x1.32c54b92e2588p-110,
     0x1.5d8e757cfb991p-111, 0x1.3904000c1c40fp-110, 0x1.4a337f4dc0a3bp-108, -0x1.f2803633b04ffp-113,
     0x1.57d3e3adec175p-108, 0x1.fef5c58766c19p-111, 0x1.a59f88abbe778p-115, -0x1.001923f4a956ep-110,
     -0x1.269796953a4c3p-109, 0x1.82ae217f3a768p-108, -0x1.8f8e7fa19e5e8p-108, -0x1.44d42307932f7p-108,
     -0x1.4217a932d10d4p-113, -0x1.d4d236cc2bb03p-108, 0x1.70a1427f8fcdfp-112, 0x1.d4e0d71c9b16ep-109,
     0x1.0f6ad65cbbac1p-112, -0x1.591e15c16efd1p-109, -0x1.f16f65181d921p-109, 0x1.d61283ef385dep-108,
     -0x1.30644a7836333p-110, -0x1.3dab3db839dd6p-111, 0x1.3bf26d2b85163p-114, 0x1.c03855204534ap-109,
     0x1.697e257ac0db2p-111, -0x1.07053c9a98bbbp-113, 0x1.7edb9d7144b6fp-108, -0x1.053987854965fp-110,
     0x1.6376b7943085cp-110, 0x1.0f92c082bbae0p-116, 0x1.354084551b4fbp-109, 0x1.547fa22c26d17p-108,
     -0x1.bfd7adfd63f48p-111, -0x1.678693176f751p-108, 0x1.8b16ae39e8cb9p-109, -0x1.c60dbfc7696f8p-111,
     0x1.a7fbc3ae675eap-108, 0x1.41cbb95c55600p-109, 0x1.2babc0edda4d9p-111, -0x1.c7470081df7dfp-111,
     0x1.aa64481e1ab72p-111, -0x1.ad1bf91503c67p-113, 0x1.9a164050e1258p-109, 0x1.27e81cecd59dap-110,
     0x1.99e51125928dap-110, 0x1.4a6cdfa70f4f8p-109, -0x1.fc44c329d5cb2p-109, 0x1.6edaac100b8fap-111,
     0x1.d8765566b032ep-110, -0x1.aea073a742049p-112, -0x1.e7044039da0f6p-108, 0x1.2da62b2a9fae7p-111,
     -0x1.ab053b05531fcp-111, -0x1.ed04e7ac8765ap-110, 0x1.7f6246f0ec615p-108, -0x1.c6cdead661cf3p-108,
     0x1.b7225a944efd6p-108, -0x1.b9818808c409ap-108, 0x1.1e92cb3c2d278p-109, -0x1.8a757b0b6a9cbp-108,
     -0x1.fc0f242bbf3dep-109, -0x1.0b9dfef44b43bp-108, 0x1.f6dd5d229ff69p-108, 0x1.4c6ad5476b516p-108,
     -0x1.4019bffc80ef3p-110, 0x1.5c5ce7280fa4dp-108, 0x1.dc060c36f7651p-112, 0x1.2f096934ec56cp-111}};

/* 1/n! for n from 2 to 14 in three parts, each the rest rounded. */
ELU_TABLE double elu_f64_inv_fact[3][13] = {
    {0x1.0000000000000p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7, 0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26, 0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33, 0x1.93974a8c07c9dp-37},
    {0x0.0p+0, 0x1.5555555555555p-57, 0x1.5555555555555p-59, 0x1.1111111111111p-63, -0x1.f49f49f49f49fp-65, 0x1.a01a01a01a01ap-73, 0x1.a01a01a01a01ap-76, -0x1.c154f8ddc6c00p-73, 0x1.cbbc05b4fa99ap-76, -0x1.c062e06d1f209p-80, -0x1.2aec959e14c06p-83, 0x1.f28e0cc748ebep-87, 0x1.05d6f8a2efd1fp-92},
    {0x0.0p+0, 0x1.5555555555555p-111, 0x1.5555555555555p-113, 0x1.1111111111111p-119, -0x1.27d27d27d27d2p-119, 0x1.a01a01a01a01ap-133, 0x1.a01a01a01a01ap-136, 0x1.71de3a556c734p-127, -0x1.c6d278883e8f5p-132, 0x1.c7880adcbc46ep-136, 0x1.2fb0073dd2d9ep-139, -0x1.7b2c4c8a840bcp-141, 0x1.3aa3346236a5dp-147}};

/* For k = kf - ROUND = 128m + j in [-7387, 0]: m << 20, what scales a
 * double by 2^m added to its upper 32 bits (elu_add_hi), is kf's low bits
 * shifted left by 13 with the low 20 cleared (kf's bits 7 to 18 hold m mod
 * 2^12: ROUND's are zero, and adding k borrows nothing from the bits above
 * 51). */
ELU_FN unsigned elu_f64_scale_hi(double kf)
{
    return ((unsigned)elu_bits(kf) << 13) & 0xFFF00000u;
}

/* neg * expm1(t) for t = th + tl in [T_MIN, -TINY], as yh + yl within
 * FAST_ERR relatively; unit_neg where neg is 1 (a GPU kernel's product by
 * a literal 1 stays three instructions). */
ELU_FN struct elu_dd elu_f64_fast(struct elu_dd t, double neg, bool unit_neg)
{
    const double kf = fma(t.hi, elu_f64_k.inv_l, ELU_F64_ROUND);
    const double k = kf - ELU_F64_ROUND;
    /* r1 = t - k*L1 exact; c, the rest of k*ln2/128 and tl, rounded once
     * (within 2^-87). r = r1 + c by Fast2Sum: exact where |r1| >= |c|
     * (k = 0 among them: c is tl), else within 2^-86, far below y's ulp
     * where k != 0 (|y| >= 2^-7.5). */
    const struct elu_dd r = elu_fast_two_sum(fma(-k, elu_f64_k.l1, t.hi), fma(-k, elu_f64_k.l2, t.lo));
    double q = fma(elu_f64_k.c7, r.hi, elu_f64_k.c6);
    q = fma(q, r.hi, elu_f64_k.c5);
    q = fma(q, r.hi, elu_f64_k.c4);
    q = fma(q, r.hi, elu_f64_k.c3);
    /* p = r + r^2/2 + r^3 q = p0 + plo, r^2 = sq + 2 rh rl (+ rl^2) */
    const struct elu_dd sq = elu_two_prod(r.hi, r.hi);
    const struct elu_dd p0 = elu_fast_two_sum(r.hi, 0.5 * sq.hi);
    const double plo = p0.lo + fma(ELU_MUL(sq.hi, r.hi), q, fma(r.hi, r.lo, r.lo) + 0.5 * sq.lo);
    const unsigned long long j = elu_bits(kf) & 127;
    const unsigned scale = elu_f64_scale_hi(kf);
    const double a_hi = elu_add_hi(ELU_LOAD(elu_f64_exp2_128[0] + j), scale);
    const double a_lo = ELU_LOAD(elu_f64_exp2_128[1] + j) * elu_add_hi(1.0, scale);
    /* A p + (A - 1): A <= 1, and |A - 1| >= 2^-7.5 > |A p| where k < 0 */
    const struct elu_dd ap = elu_two_prod(a_hi, p0.hi);
    const struct elu_dd am = elu_fast_two_sum(-1.0, a_hi);
    const struct elu_dd e = elu_fast_two_sum(am.hi, ap.hi);
    const double e_lo = e.lo + (am.lo + (a_lo + fma(a_hi, plo, fma(a_lo, p0.hi, ap.lo))));
    if (unit_neg)
        return elu_dd_of(e.hi, e_lo);
    const struct elu_dd y = elu_two_prod(neg, e.hi);
    return elu_dd_of(y.hi, fma(neg, e_lo, y.lo));
}

/* Whether every value within err |y| of y (relatively) rounds as y does
 * (Ziv's test): then *out is that rounding. */
ELU_FN bool elu_f64_rounds(struct elu_dd y, double err, double *out)
{
    const double e = err * fabs(y.hi);
    *out = y.hi + (y.lo - e);
    return *out == y.hi + (y.lo + e);
}

/* -------- the slow path: triple-double -------- */

/* h + m + l, each part within about an ulp of the one before. */
struct elu_td {
    double h, m, l;
};

ELU_FN struct elu_td elu_td_of(double h, double m, double l)
{
    struct elu_td v;
    v.h = h;
    v.m = m;
    v.l = l;
    return v;
}

/* a + b + c, exactly, as a triple-double (two TwoSums from the bottom,
 * one for the rest). */
ELU_FN struct elu_td elu_td_sum3(double a, double b, double c)
{
    const struct elu_dd s = elu_two_sum(b, c);
    const struct elu_dd u = elu_two_sum(a, s.hi);
    const struct elu_dd v = elu_two_sum(u.lo, s.lo);
    return elu_td_of(u.hi, v.hi, v.lo);
}

/* Within 2^-155 of a + b relatively, where the two do not cancel. */
ELU_FN struct elu_td elu_td_add(struct elu_td a, struct elu_td b)
{
    const struct elu_dd h = elu_two_sum(a.h, b.h);
    const struct elu_dd m = elu_two_sum(a.m, b.m);
    const struct elu_dd hm = elu_two_sum(h.lo, m.hi);
    return elu_td_sum3(h.hi, hm.hi, hm.lo + m.lo + a.l + b.l);
}

/* Within 2^-155 of a b relatively. */
ELU_FN struct elu_td elu_td_mul(struct elu_td a, struct elu_td b)
{
    const struct elu_dd p = elu_two_prod(a.h, b.h);
    const struct elu_dd q1 = elu_two_prod(a.h, b.m), q2 = elu_two_prod(a.m, b.h);
    const struct elu_dd s = elu_two_sum(q1.hi, q2.hi);
    const struct elu_dd m = elu_two_sum(p.lo, s.hi);
    const double l = m.lo + s.lo + q1.lo + q2.lo + fma(a.h, b.l, fma(a.l, b.h, a.m * b.m));
    return elu_td_sum3(p.hi, m.hi, l);
}

ELU_FN struct elu_td elu_td_inv_fact(int n)
{
    return elu_td_of(ELU_LOAD(elu_f64_inv_fact[0] + n - 2), ELU_LOAD(elu_f64_inv_fact[1] + n - 2),
                     ELU_LOAD(elu_f64_inv_fact[2] + n - 2));
}

/* neg * expm1(t) for t = th + tl in [T_MIN, -TINY], within 2^-150
 * relatively: the fast path's steps, with ln2/128 in four parts (the
 * products by the first three exact) and Taylor's polynomial to degree
 * 14 (its terms from degree 11 on in double, from 6 in double-double). */
ELU_FN struct elu_td elu_f64_slow_td(struct elu_dd t, double neg)
{
    const double kf = fma(t.hi, ELU_F64_INV_L, ELU_F64_ROUND);
    const double k = kf - ELU_F64_ROUND;
    const struct elu_dd kl2 = elu_two_prod(k, ELU_F64_L2), kl3 = elu_two_prod(k, ELU_F64_L3);
    struct elu_td r = elu_td_sum3(fma(-k, ELU_F64_L1, t.hi), -kl2.hi, t.lo);
    r = elu_td_add(r, elu_td_sum3(-kl2.lo, -kl3.hi, fma(-k, ELU_F64_L4, -kl3.lo)));
    double h = ELU_LOAD(elu_f64_inv_fact[0] + 12);
    ELU_ROLLED
    for (int n = 13; n >= 11; n--)
        h = fma(h, r.h, ELU_LOAD(elu_f64_inv_fact[0] + n - 2));
    struct elu_dd d = elu_dd_of(h, 0);
    ELU_ROLLED
    for (int n = 10; n >= 6; n--)
        d = elu_dd_add(elu_dd_mul(d, elu_dd_of(r.h, r.m)),
                       elu_dd_of(ELU_LOAD(elu_f64_inv_fact[0] + n - 2), ELU_LOAD(elu_f64_inv_fact[1] + n - 2)));
    struct elu_td z = elu_td_of(d.hi, d.lo, 0);
    ELU_ROLLED
    for (int n = 5; n >= 2; n--)
        z = elu_td_add(elu_td_mul(z, r), elu_td_inv_fact(n));
    z = elu_td_mul(elu_td_add(elu_td_mul(z, r), elu_td_of(1, 0, 0)), r); /* expm1(r) */
    const unsigned long long j = elu_bits(kf) & 127;
    const double pow2m = elu_add_hi(1.0, elu_f64_scale_hi(kf));
    const struct elu_td a = elu_td_of(ELU_LOAD(elu_f64_exp2_128[0] + j) * pow2m,
                                      ELU_LOAD(elu_f64_exp2_128[1] + j) * pow2m,
                                      ELU_LOAD(elu_f64_exp2_128[2] + j) * pow2m);
    const struct elu_td e = elu_td_add(elu_td_mul(a, z), elu_td_add(a, elu_td_of(-1, 0, 0)));
    return elu_td_mul(e, elu_td_of(neg, 0, 0));
}

/* The double nearest h + m + l: h + m rounded to nearest (TwoSum), and
 * the rest, rounded to odd, added to it. */
ELU_FN double elu_f64_round_td(struct elu_td y)
{
    const struct elu_dd s = elu_two_sum(y.h, y.m), u = elu_two_sum(s.lo, y.l);
    unsigned long long b = elu_bits(u.hi);
    if (u.lo != 0 && !(b & 1))
        b += (u.lo > 0) == (u.hi > 0) ? 1 : (unsigned long long)-1;
    return s.hi + elu_from_bits(b);
}

ELU_SLOW_FN double elu_f64_slow(struct elu_dd t, double neg)
{
    return elu_f64_round_td(elu_f64_slow_td(t, neg));
}

/* -------- tiny t: the exact product -------- */

/* v = m 2^e, m an integer below 2^53, for finite nonzero v (sign apart). */
ELU_FN unsigned long long elu_f64_significand(double v, int *e)
{
    const unsigned long long b = elu_bits(v), field = b >> 52 & 0x7ff, frac = b & ((1ull << 52) - 1);
    *e = field ? (int)field - 1075 : -1074;
    return field ? frac | 1ull << 52 : frac;
}

/* hi:lo = a b. */
ELU_FN void elu_f64_mul64(unsigned long long a, unsigned long long b, unsigned long long *hi,
                          unsigned long long *lo)
{
#ifdef __CUDACC__
    *hi = __umul64hi(a, b);
#else /* by 32-bit halves: ISO C has no 128-bit type */
    const unsigned long long m = 0xffffffffull, a1 = a >> 32, a0 = a & m, b1 = b >> 32, b0 = b & m;
    const unsigned long long mid = (a0 * b0 >> 32) + (a1 * b0 & m) + a0 * b1;
    *hi = a1 * b1 + (a1 * b0 >> 32) + (mid >> 32);
#endif
    *lo = a * b;
}

/* Bit i of the 192-bit p (p[0] lowest), and whether any below it is set. */
ELU_FN unsigned elu_f64_bit(const unsigned long long p[3], int i)
{
    return i >= 0 && i < 192 ? (unsigned)(p[i / 64] >> i % 64 & 1) : 0;
}
ELU_FN bool elu_f64_below(const unsigned long long p[3], int i)
{
    bool any = false;
    for (int w = 0; w < 3; w++) {
        const int n = i - 64 * w; /* the bits of word w below i */
        any |= n >= 64 ? p[w] != 0 : n > 0 && (p[w] & ((1ull << n) - 1)) != 0;
    }
    return any;
}

/* neg * x * nip rounded to nearest, ties toward zero (see atop this file),
 * for x < 0 and neg, nip as numerics.c takes them. */
ELU_SLOW_FN double elu_f64_tiny(double x, double neg, double nip)
{
    int ex, en, es;
    const unsigned long long mx = elu_f64_significand(x, &ex), mn = elu_f64_significand(neg, &en);
    const unsigned long long ms = elu_f64_significand(nip, &es);
    unsigned long long h, l, p[3], c;
    elu_f64_mul64(mx, mn, &h, &l); /* below 2^106 */
    elu_f64_mul64(l, ms, &c, &p[0]);
    elu_f64_mul64(h, ms, &p[2], &p[1]);
    p[1] += c;
    p[2] += p[1] < c;
    const int e = ex + en + es; /* the product is p 2^e */
    int len = 0;
    for (int i = 191; i >= 0 && !len; i--)
        len = elu_f64_bit(p, i) ? i + 1 : 0;
    /* the result's last bit: 53 bits down from the top, or the subnormals' */
    const int last = e + len - 53 > -1074 ? e + len - 53 : -1074;
    const int drop = last - e;
    unsigned long long keep = 0;
    for (int i = 52; i >= 0; i--)
        keep = keep << 1 | elu_f64_bit(p, drop + i);
    keep += elu_f64_bit(p, drop - 1) && elu_f64_below(p, drop - 1);
    const double v = ldexp((double)keep, last);
    return neg > 0 ? -v : v;
}

/* The whole forward for x <= 0 or NaN (x > 0 is scale * x, one rounding);
 * unit_nip where nip is 1, unit_neg where neg is. */
ELU_FN double elu_f64_forward_neg(double x, double neg, double nip, bool unit_nip, bool unit_neg)
{
    if (x == 0 || x != x)
        return x * neg; /* the signed zero of x * neg; NaN */
    struct elu_dd t = unit_nip ? elu_dd_of(x, 0) : elu_two_prod(x, nip);
    if (fabs(t.hi) < ELU_F64_TINY)
        return elu_f64_tiny(x, neg, nip);
    if (t.hi < ELU_F64_T_MIN)
        t = elu_dd_of(ELU_F64_T_MIN, 0); /* -inf too */
    double y;
    return elu_f64_rounds(elu_f64_fast(t, neg, unit_neg), ELU_F64_FAST_ERR, &y) ? y
                                                                               : elu_f64_slow(t, neg);
}

#endif
